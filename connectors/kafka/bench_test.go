package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/codec"
)

var benchCount = stream.NewValueState[int64]("count")

// BenchmarkKafkaCountsLocal is bench-kafka's job (Kafka → keyed count →
// Kafka, at-least-once, p=2) in the local executor, in this process, so
// that its CPU profile and allocations show the connector's costs
// (-cpuprofile, -benchmem) without a cluster; plain-records/s is
// kafkatest.PlainCounts on the same records. GOFL_BENCH_KAFKA_RECORDS
// sets the input (default 200,000).
func BenchmarkKafkaCountsLocal(b *testing.B) {
	n := kafkatest.BenchRecords(200_000)
	const keys, partitions = 1024, 2
	broker := kafkatest.Broker(b)
	in := kafkatest.Topic(b, broker, "bench-in", partitions)
	if err := kafkatest.ProduceNumbers(broker, in, partitions, 0, n); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var gofl, plain time.Duration
	for i := 0; i < b.N; i++ {
		out := kafkatest.Topic(b, broker, "bench-out", partitions)
		start := time.Now()
		src, err := NewSource([]string{broker}, func(r *kgo.Record) (int64, error) {
			return strconv.ParseInt(string(r.Value), 10, 64)
		}, Topics(in), BoundedBy(Latest()))
		if err != nil {
			b.Fatal(err)
		}
		env := stream.NewEnvironment(stream.WithParallelism(2))
		nums := Add(env, src, stream.SourceWatermarks{MaxOutOfOrderness: time.Second}, "numbers")
		counted := stream.KeyedProcess(stream.KeyBy(nums, func(v int64) int64 { return v % keys }),
			stream.KeyedProcessFunction[int64, int64, codec.Tuple2[int64, int64]]{
				ProcessElement: func(ctx *stream.KeyedContext[int64], _ int64, out stream.Collector[codec.Tuple2[int64, int64]]) error {
					c, _ := benchCount.Value(ctx)
					c++
					benchCount.Update(ctx, c)
					out.Collect(codec.Tuple2[int64, int64]{F0: ctx.CurrentKey(), F1: c})
					return nil
				},
			})
		if _, err := Sink(counted, []string{broker}, out, func(t codec.Tuple2[int64, int64]) *kgo.Record {
			ks := strconv.FormatInt(t.F0, 10)
			return &kgo.Record{Key: []byte(ks), Value: []byte(ks + " " + strconv.FormatInt(t.F1, 10))}
		}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		_, err = env.Execute(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		gofl += time.Since(start)

		b.StopTimer()
		out = kafkatest.Topic(b, broker, "bench-plain-out", partitions)
		b.StartTimer()
		start = time.Now()
		if err := kafkatest.PlainCounts(broker, in, out, n, keys); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(start)
	}
	g := float64(n) * float64(b.N) / gofl.Seconds()
	p := float64(n) * float64(b.N) / plain.Seconds()
	b.ReportMetric(g, "gofl-records/s")
	b.ReportMetric(p, "plain-records/s")
	b.ReportMetric(g/p, "ratio")
}
