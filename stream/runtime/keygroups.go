package runtime

import (
	"fmt"
	"math"
	"reflect"
)

// HashKey hashes a key the same way in every process (unlike Go's map
// hash), so producers and the runner's keyed state agree on key groups.
// Strings, integers, floats, booleans and arrays and structs of them hash by
// value; other kinds hash their fmt representation.
func HashKey(k any) uint64 {
	h := uint64(fnvOffset)
	h = hashValue(h, k)
	return fmix64(h)
}

// KeyHasher returns HashKey for keys of type K without boxing them into
// an interface on the hot path: strings and integers hash directly, other
// types through HashKey. The result equals HashKey(k) for every k.
func KeyHasher[K comparable]() func(K) uint64 {
	var zero K
	switch any(zero).(type) {
	case string:
		return func(k K) uint64 { return fmix64(hashString(fnvOffset, any(k).(string))) }
	case int:
		return func(k K) uint64 { return fmix64(hashUint(fnvOffset, uint64(any(k).(int)))) }
	case int64:
		return func(k K) uint64 { return fmix64(hashUint(fnvOffset, uint64(any(k).(int64)))) }
	}
	return func(k K) uint64 { return HashKey(k) }
}

// KeyGroup is the key group of a key: hash(key) mod maxParallelism, as
// Flink's KeyGroupRangeAssignment.
func KeyGroup(k any, maxParallelism int) int {
	return int(HashKey(k) % uint64(maxParallelism))
}

// OperatorIndex is the subtask that owns a key group:
// keyGroup × parallelism / maxParallelism, as in Flink.
func OperatorIndex(keyGroup, maxParallelism, parallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

func hashUint(h, v uint64) uint64 {
	for range 8 { // little-endian bytes, as hashBytes of PutUint64
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return hashUint(h, uint64(len(s)))
}

func hashValue(h uint64, k any) uint64 {
	switch v := k.(type) {
	case string:
		return hashString(h, v)
	case int:
		return hashUint(h, uint64(v))
	case int64:
		return hashUint(h, uint64(v))
	case int32:
		return hashUint(h, uint64(v))
	case uint64:
		return hashUint(h, v)
	case uint32:
		return hashUint(h, uint64(v))
	case bool:
		if v {
			return hashUint(h, 1)
		}
		return hashUint(h, 0)
	case float64:
		return hashUint(h, math.Float64bits(v))
	case nil:
		return hashUint(h, 0)
	}
	return hashReflect(h, reflect.ValueOf(k))
}

func hashReflect(h uint64, v reflect.Value) uint64 {
	switch v.Kind() {
	case reflect.String:
		return hashString(h, v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return hashUint(h, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return hashUint(h, v.Uint())
	case reflect.Bool:
		if v.Bool() {
			return hashUint(h, 1)
		}
		return hashUint(h, 0)
	case reflect.Float32, reflect.Float64:
		return hashUint(h, math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		return hashUint(hashUint(h, math.Float64bits(real(c))), math.Float64bits(imag(c)))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			h = hashReflect(h, v.Index(i))
		}
		return h
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			h = hashReflect(h, v.Field(i))
		}
		return h
	case reflect.Interface:
		if v.IsNil() {
			return hashUint(h, 0)
		}
		return hashReflect(h, v.Elem())
	case reflect.Invalid:
		return hashUint(h, 0)
	}
	return hashString(h, fmt.Sprintf("%T:%v", v.Interface(), v.Interface()))
}

// fmix64 is MurmurHash3's finalizer: it spreads FNV's low-entropy high bits.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
