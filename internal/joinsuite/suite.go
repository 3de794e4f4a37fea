// Package joinsuite is a batch inner join, left outer join and CoGroup of
// two generated inputs, with a reference computation of their results in
// plain Go that shares no code with the SDK. Tests run it in the local
// executor and, through the testjob binary, on a cluster.
package joinsuite

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gofl/gofl/stream"
)

// Left is a record of the first input.
type Left struct {
	Key string
	V   int64
}

// Right is a record of the second input.
type Right struct {
	Key string
	W   int64
}

// Spec sizes the inputs: NA and NB records whose keys are drawn from
// [0, Keys) for the left and [Keys/2, Keys/2+Keys) for the right, so both
// sides have keys the other lacks, and most keys repeat. Pad makes each
// key longer (bytes of the records), for spill tests.
type Spec struct {
	NA, NB, Keys int64
	Pad          int
	// Hint is the inner and left outer joins' strategy (the reference
	// does not depend on it).
	Hint stream.JoinHint
}

func mix(i, salt int64) int64 {
	x := uint64(i)*0x9e3779b97f4a7c15 + uint64(salt)
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return int64(x >> 1)
}

func (s Spec) key(k int64) string {
	return fmt.Sprintf("k%0*d", 6+s.Pad, k)
}

// LeftAt is the i-th left record.
func (s Spec) LeftAt(i int64) Left {
	return Left{Key: s.key(mix(i, 1) % max(s.Keys, 1)), V: mix(i, 2) % 1000}
}

// RightAt is the i-th right record.
func (s Spec) RightAt(i int64) Right {
	return Right{Key: s.key(s.Keys/2 + mix(i, 3)%max(s.Keys, 1)), W: mix(i, 4) % 1000}
}

// Build adds the inner join, the left outer join and the CoGroup of the
// generated inputs to env (which must be in Batch mode); their results are
// lines "<kind>|..." of one stream. The inner and left outer join lines
// list a pair; CoGroup's one line per key summarizes both groups.
func Build(env *stream.Environment, s Spec) stream.DataStream[string] {
	a := stream.Generate(env, s.NA, s.LeftAt).Name("Lefts")
	b := stream.Generate(env, s.NB, s.RightAt).Name("Rights")
	ka := stream.KeyBy(a, func(l Left) string { return l.Key })
	kb := stream.KeyBy(b, func(r Right) string { return r.Key })
	inner := stream.InnerJoin(ka, kb, func(l Left, r Right) string {
		return "inner|" + l.Key + "|" + strconv.FormatInt(l.V, 10) + "|" + strconv.FormatInt(r.W, 10)
	}, s.Hint)
	left := stream.LeftOuterJoin(ka, kb, func(l Left, r Right, ok bool) string {
		if !ok {
			return "left|" + l.Key + "|" + strconv.FormatInt(l.V, 10) + "|-"
		}
		return "left|" + l.Key + "|" + strconv.FormatInt(l.V, 10) + "|" + strconv.FormatInt(r.W, 10)
	}, s.Hint)
	cg := stream.CoGroup(ka, kb, func(k string, ls []Left, rs []Right, out stream.Collector[string]) error {
		var sv, sw int64
		for _, l := range ls {
			if l.Key != k {
				return fmt.Errorf("left record of key %q in the group of %q", l.Key, k)
			}
			sv += l.V
		}
		for _, r := range rs {
			if r.Key != k {
				return fmt.Errorf("right record of key %q in the group of %q", r.Key, k)
			}
			sw += r.W
		}
		out.Collect(fmt.Sprintf("cogroup|%s|%d|%d|%d|%d", k, len(ls), len(rs), sv, sw))
		return nil
	})
	return stream.Union(inner, left, cg)
}

// Expected is the reference: Build's lines, sorted.
func Expected(s Spec) []string {
	ls := map[string][]int64{}
	rs := map[string][]int64{}
	for i := range s.NA {
		l := s.LeftAt(i)
		ls[l.Key] = append(ls[l.Key], l.V)
	}
	for i := range s.NB {
		r := s.RightAt(i)
		rs[r.Key] = append(rs[r.Key], r.W)
	}
	var out []string
	for k, vs := range ls {
		ws := rs[k]
		for _, v := range vs {
			if len(ws) == 0 {
				out = append(out, fmt.Sprintf("left|%s|%d|-", k, v))
			}
			for _, w := range ws {
				out = append(out, fmt.Sprintf("inner|%s|%d|%d", k, v, w), fmt.Sprintf("left|%s|%d|%d", k, v, w))
			}
		}
	}
	keys := map[string]bool{}
	for k := range ls {
		keys[k] = true
	}
	for k := range rs {
		keys[k] = true
	}
	for k := range keys {
		var sv, sw int64
		for _, v := range ls[k] {
			sv += v
		}
		for _, w := range rs[k] {
			sw += w
		}
		out = append(out, fmt.Sprintf("cogroup|%s|%d|%d|%d|%d", k, len(ls[k]), len(rs[k]), sv, sw))
	}
	sort.Strings(out)
	return out
}

// Checksum is a count and an additive checksum of a join's results.
type Checksum struct {
	Kind string
	N    int64
	Sum  int64
}

// checksumMul separates a pair's left value from its right one.
const checksumMul = 1_000_003

// BuildChecksum adds an inner and a left outer join of the generated
// inputs to env (Batch mode), each reduced to one Checksum line "<kind>
// <count> <sum>": a pair counts l.V*checksumMul + r.W, an unmatched left
// record l.V*checksumMul - 1. Its output is two lines however large the
// inputs are.
func BuildChecksum(env *stream.Environment, s Spec) stream.DataStream[string] {
	a := stream.Generate(env, s.NA, s.LeftAt).Name("Lefts")
	b := stream.Generate(env, s.NB, s.RightAt).Name("Rights")
	ka := stream.KeyBy(a, func(l Left) string { return l.Key })
	kb := stream.KeyBy(b, func(r Right) string { return r.Key })
	inner := stream.InnerJoin(ka, kb, func(l Left, r Right) Checksum {
		return Checksum{"inner", 1, l.V*checksumMul + r.W}
	}, s.Hint)
	left := stream.LeftOuterJoin(ka, kb, func(l Left, r Right, ok bool) Checksum {
		if !ok {
			return Checksum{"left", 1, l.V*checksumMul - 1}
		}
		return Checksum{"left", 1, l.V*checksumMul + r.W}
	}, s.Hint)
	sums := stream.KeyBy(stream.Union(inner, left), func(c Checksum) string { return c.Kind }).
		Reduce(func(x, y Checksum) Checksum { return Checksum{x.Kind, x.N + y.N, x.Sum + y.Sum} })
	return stream.Map(sums, func(c Checksum) string { return fmt.Sprintf("%s %d %d", c.Kind, c.N, c.Sum) })
}

// ExpectedChecksum is BuildChecksum's reference, from per-key counts and
// sums of each side (memory per key, not per record or pair), sorted.
func ExpectedChecksum(s Spec) []string {
	type agg struct{ na, sv, nb, sw int64 }
	keys := map[string]*agg{}
	get := func(k string) *agg {
		a := keys[k]
		if a == nil {
			a = &agg{}
			keys[k] = a
		}
		return a
	}
	for i := range s.NA {
		l := s.LeftAt(i)
		a := get(l.Key)
		a.na++
		a.sv += l.V
	}
	for i := range s.NB {
		r := s.RightAt(i)
		a := get(r.Key)
		a.nb++
		a.sw += r.W
	}
	var in, left Checksum
	for _, a := range keys {
		pairs := a.na * a.nb
		sum := a.sv*a.nb*checksumMul + a.sw*a.na
		in.N += pairs
		in.Sum += sum
		if a.nb == 0 {
			left.N += a.na
			left.Sum += a.sv*checksumMul - a.na
		} else {
			left.N += pairs
			left.Sum += sum
		}
	}
	var out []string
	if in.N > 0 {
		out = append(out, fmt.Sprintf("inner %d %d", in.N, in.Sum))
	}
	if left.N > 0 {
		out = append(out, fmt.Sprintf("left %d %d", left.N, left.Sum))
	}
	sort.Strings(out)
	return out
}

// BuildAggregation adds a batch Reduce and an Aggregate (without a merge
// function) of the left input per key to env (Batch mode); their results
// are lines "reduce|<key>|<count>|<sum>" and "aggregate|<key>|<count>|<sum>"
// of one stream. With many keys (Spec.Keys) they outgrow small budgets.
func BuildAggregation(env *stream.Environment, s Spec) stream.DataStream[string] {
	type acc struct {
		Key    string
		N, Sum int64
	}
	a := stream.Generate(env, s.NA, s.LeftAt).Name("Lefts")
	ka := stream.KeyBy(stream.Map(a, func(l Left) acc { return acc{l.Key, 1, l.V} }), func(x acc) string { return x.Key })
	red := ka.Reduce(func(x, y acc) acc { return acc{x.Key, x.N + y.N, x.Sum + y.Sum} })
	agg := stream.Aggregate(ka, stream.NewAggregator(func() acc { return acc{} },
		func(v acc, x acc) acc { return acc{v.Key, x.N + v.N, x.Sum + v.Sum} },
		func(x acc) acc { return x }))
	line := func(kind string) func(acc) string {
		return func(x acc) string { return fmt.Sprintf("%s|%s|%d|%d", kind, x.Key, x.N, x.Sum) }
	}
	return stream.Union(stream.Map(red, line("reduce")), stream.Map(agg, line("aggregate")))
}

// ExpectedAggregation is BuildAggregation's reference, sorted.
func ExpectedAggregation(s Spec) []string {
	n, sum := map[string]int64{}, map[string]int64{}
	for i := range s.NA {
		l := s.LeftAt(i)
		n[l.Key]++
		sum[l.Key] += l.V
	}
	var out []string
	for k := range n {
		for _, kind := range []string{"reduce", "aggregate"} {
			out = append(out, fmt.Sprintf("%s|%s|%d|%d", kind, k, n[k], sum[k]))
		}
	}
	sort.Strings(out)
	return out
}
