package codec

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Holder nests maps and slices inside each other and inside structs, so
// every composite path of a derived codec runs on memory the caller owns.
type Holder struct {
	Name   string
	Counts map[string]int64
	Lists  map[int32][]Event
	Deep   map[string]map[int64][]string
	Ptrs   map[string]*Event
	Rows   []map[string]int64
	Grid   [][]int64
	Inner  struct{ M map[uint16]Session }
}

func makeHolder(i int) Holder {
	ev := func(j int) Event {
		return Event{ID: int64(i*100 + j), Word: "w" + strconv.Itoa(j), Count: int64(j), TS: time.Unix(int64(i), int64(j)).UTC()}
	}
	h := Holder{
		Name:   "holder-" + strconv.Itoa(i),
		Counts: map[string]int64{},
		Lists:  map[int32][]Event{},
		Deep:   map[string]map[int64][]string{},
		Ptrs:   map[string]*Event{},
	}
	h.Inner.M = map[uint16]Session{}
	for j := range 1 + i%7 {
		k := "k" + strconv.Itoa(j)
		h.Counts[k] = int64(i * j)
		h.Lists[int32(j)] = []Event{ev(j), ev(j + 1)}
		h.Deep[k] = map[int64][]string{int64(j): {k, h.Name}, -1: {"x"}}
		e := ev(j)
		h.Ptrs[k] = &e
		h.Rows = append(h.Rows, map[string]int64{k: int64(j), "n": int64(i)})
		h.Grid = append(h.Grid, []int64{int64(i), int64(j), int64(i + j)})
		h.Inner.M[uint16(j)] = Session{User: k, Clicks: []int64{int64(j)}, Pages: []Event{ev(j)}, Counts: map[string]int64{k: 1}}
	}
	return h
}

// roundTripOnStack encodes and decodes a value that lives in this frame,
// at a stack depth of depth extra frames: noescape lets the codec work on
// stack memory, so a pointer the codec kept past the call would dangle as
// soon as this goroutine's stack moves or dies.
func roundTripOnStack(c Codec[Holder], i, depth int) (Holder, error) {
	if depth > 0 {
		var pad [64]int64 // make every level's frame big enough to grow the stack
		pad[depth%64] = int64(depth)
		h, err := roundTripOnStack(c, i, depth-1)
		if pad[depth%64] != int64(depth) {
			panic("stack corrupted")
		}
		return h, err
	}
	v := makeHolder(i)
	buf := c.Append(nil, v)
	runtime.GC()
	got, n, err := c.Decode(buf)
	if err != nil {
		return Holder{}, err
	}
	if n != len(buf) {
		return Holder{}, fmt.Errorf("decoded %d of %d bytes", n, len(buf))
	}
	return got, nil
}

// TestMapsAndSlicesSurviveGC runs maps and slices (in structs, in maps, in
// slices) through a derived codec on fresh goroutine stacks at varying
// depths, forcing collections between encoding, decoding and checking, so
// a pointer the codec retained into a dead or moved stack, or memory it
// forgot to keep alive, shows up as a mismatch or a crash (run with -race,
// which also turns on checkptr).
func TestMapsAndSlicesSurviveGC(t *testing.T) {
	c := MustFor[Holder]()
	const workers, rounds = 4, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := w*rounds + r
				// Each round on a new goroutine: its stack dies afterwards and
				// its memory is reused by the next ones.
				done := make(chan struct{})
				var got Holder
				var err error
				go func() {
					defer close(done)
					got, err = roundTripOnStack(c, i, r%40)
				}()
				<-done
				runtime.GC()
				if err != nil {
					errs <- fmt.Errorf("round %d: %w", i, err)
					continue
				}
				if want := makeHolder(i); !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("round %d: decoded %+v, want %+v", i, got, want)
				}
				// Encoding what was decoded, after a collection, gives the
				// same value back.
				again, _, err := c.Decode(c.Append(nil, got))
				if err != nil || !reflect.DeepEqual(again, got) {
					errs <- fmt.Errorf("round %d: re-encoded: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
