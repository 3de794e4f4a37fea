package codec

import (
	"bytes"
	"encoding/gob"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Benchmarks: each op is one record. "roundtrip" encodes and decodes it,
// "encode" and "decode" do half each. The gob anchor uses one long-lived
// gob.Encoder/Decoder pair over a shared buffer (type information is sent
// once, as in a stream), which is gob's best case. Metrics: records/s, MB/s
// of the codec's own encoded bytes, B/rec (encoded size), allocs/op.
//
//	go test -run '^$' -bench . -benchmem ./stream/codec

const nRecs = 1024

func eventRecords() []Event {
	r := rand.New(rand.NewPCG(1, 1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]Event, nRecs)
	for i := range recs {
		recs[i] = Event{
			ID:    r.Int64N(1 << 40),
			Word:  strings.Repeat(string(rune('a'+i%26)), 60+r.IntN(21)), // ~70 bytes
			Count: r.Int64N(1000),
			TS:    base.Add(time.Duration(r.Int64N(int64(time.Hour)))),
		}
	}
	return recs
}

func int64Records() []int64 {
	r := rand.New(rand.NewPCG(2, 2))
	recs := make([]int64, nRecs)
	for i := range recs {
		recs[i] = r.Int64N(1<<32) - 1<<31 // typical counters/ids: ~5-byte varints
	}
	return recs
}

func tupleRecords() []Tuple2[string, int64] {
	r := rand.New(rand.NewPCG(3, 3))
	words := strings.Fields("the quick brown fox jumps over the lazy dog stream processing with flink in go")
	recs := make([]Tuple2[string, int64], nRecs)
	for i := range recs {
		recs[i] = T2(words[r.IntN(len(words))], r.Int64N(10000))
	}
	return recs
}

func report(b *testing.B, bytesPerRec float64) {
	sec := b.Elapsed().Seconds()
	if sec == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/sec, "records/s")
	b.ReportMetric(float64(b.N)*bytesPerRec/sec/1e6, "MB/s")
	b.ReportMetric(bytesPerRec, "B/rec")
}

func avgSize[T any](c Codec[T], recs []T) float64 {
	var n int
	for _, v := range recs {
		n += len(c.Append(nil, v))
	}
	return float64(n) / float64(len(recs))
}

func benchCodec[T any](b *testing.B, c Codec[T], recs []T) {
	size := avgSize(c, recs)
	encoded := make([][]byte, len(recs))
	for i, v := range recs {
		encoded[i] = c.Append(nil, v)
	}
	b.Run("roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		var sink T
		for i := 0; b.Loop(); i++ {
			buf = c.Append(buf[:0], recs[i%nRecs])
			v, _, err := c.Decode(buf)
			if err != nil {
				b.Fatal(err)
			}
			sink = v
		}
		_ = sink
		report(b, size)
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for i := 0; b.Loop(); i++ {
			buf = c.Append(buf[:0], recs[i%nRecs])
		}
		report(b, size)
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var sink T
		for i := 0; b.Loop(); i++ {
			v, _, err := c.Decode(encoded[i%nRecs])
			if err != nil {
				b.Fatal(err)
			}
			sink = v
		}
		_ = sink
		report(b, size)
	})
}

func benchGob[T any](b *testing.B, recs []T) {
	b.Run("roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc, dec := gob.NewEncoder(&buf), gob.NewDecoder(&buf)
		// Prime the stream so the type description is not measured.
		var out T
		if err := enc.Encode(&recs[0]); err != nil {
			b.Fatal(err)
		}
		if err := dec.Decode(&out); err != nil {
			b.Fatal(err)
		}
		var total int
		for i := 0; b.Loop(); i++ {
			if err := enc.Encode(&recs[i%nRecs]); err != nil {
				b.Fatal(err)
			}
			total += buf.Len()
			var out T
			if err := dec.Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
		report(b, float64(total)/float64(b.N))
	})
}

func BenchmarkInt64(b *testing.B) {
	recs := int64Records()
	b.Run("codec=varint", func(b *testing.B) { benchCodec(b, Int64, recs) })
	b.Run("codec=fixed", func(b *testing.B) { benchCodec(b, Int64Fixed, recs) })
	b.Run("codec=For", func(b *testing.B) { benchCodec(b, MustFor[int64](), recs) })
	b.Run("gob", func(b *testing.B) { benchGob(b, recs) })
}

func BenchmarkEvent(b *testing.B) {
	recs := eventRecords()
	b.Run("codec=For", func(b *testing.B) { benchCodec(b, MustFor[Event](), recs) })
	type eventFixed struct {
		ID    int64 `codec:"fixed"`
		Word  string
		Count int64
		TS    time.Time
	}
	fixed := make([]eventFixed, len(recs))
	for i, r := range recs {
		fixed[i] = eventFixed(r)
	}
	b.Run("codec=For,fixedID", func(b *testing.B) { benchCodec(b, MustFor[eventFixed](), fixed) })
	b.Run("gob", func(b *testing.B) { benchGob(b, recs) })
}

func BenchmarkTuple2(b *testing.B) {
	recs := tupleRecords()
	b.Run("codec=For", func(b *testing.B) { benchCodec(b, MustFor[Tuple2[string, int64]](), recs) })
	b.Run("codec=TupleCodec2", func(b *testing.B) { benchCodec(b, TupleCodec2(String, Int64), recs) })
	b.Run("gob", func(b *testing.B) { benchGob(b, recs) })
}

// BenchmarkGobFallback shows the cost of the explicit Gob codec, which must
// make every record self-describing.
func BenchmarkGobFallback(b *testing.B) {
	b.Run("Event", func(b *testing.B) { benchCodec(b, Gob[Event](), eventRecords()[:nRecs]) })
}

// Session is a record with slices and a map, the composite paths of a
// derived codec (slice and map nodes).
type Session struct {
	User   string
	Clicks []int64
	Pages  []Event
	Counts map[string]int64
}

func sessionRecords() []Session {
	r := rand.New(rand.NewPCG(4, 4))
	words := strings.Fields("home search cart checkout help account orders")
	events := eventRecords()
	recs := make([]Session, nRecs)
	for i := range recs {
		s := Session{User: words[r.IntN(len(words))], Counts: map[string]int64{}}
		for range 1 + r.IntN(8) {
			s.Clicks = append(s.Clicks, r.Int64N(1<<20))
		}
		for range 1 + r.IntN(2) {
			s.Pages = append(s.Pages, events[r.IntN(len(events))])
		}
		for range 1 + r.IntN(4) {
			s.Counts[words[r.IntN(len(words))]] = r.Int64N(100)
		}
		recs[i] = s
	}
	return recs
}

func BenchmarkSession(b *testing.B) {
	recs := sessionRecords()
	b.Run("codec=For", func(b *testing.B) { benchCodec(b, MustFor[Session](), recs) })
}
