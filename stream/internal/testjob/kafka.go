package main

// The job of the Kafka end-to-end tests (issue #16):
//
//	kafka-counts --brokers HOST:PORT --input TOPIC --output TOPIC --keys K --prefix TXNPREFIX
//	    [--bounded] [--at-least-once]
//
// reads numbers from the input topic (unbounded, discovering new
// partitions every 200 ms; with --bounded, up to each partition's latest
// offset at start, then it ends), keys each number n by n mod K, keeps a running
// count per key in keyed ValueState and writes "key count" records (Kafka
// key: the key) to the output topic through the exactly-once Kafka sink.
// Exactly once means a read_committed reader of the output sees, for each
// key k, exactly the counts 1 .. c(k).

import (
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/connectors/kafka"
	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/codec"
)

func init() {
	stream.RegisterJob("kafka-counts", buildKafkaCounts)
}

var kafkaCount = stream.NewValueState[int64]("count")

func buildKafkaCounts(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("kafka-counts", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "", "bootstrap broker")
	input := fs.String("input", "", "input topic")
	output := fs.String("output", "", "output topic")
	keys := fs.Int64("keys", 16, "keys")
	prefix := fs.String("prefix", "", "transactional.id prefix")
	bounded := fs.Bool("bounded", false, "read up to the latest offsets at start, then end")
	atLeastOnce := fs.Bool("at-least-once", false, "at-least-once sink instead of exactly-once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" || *input == "" || *output == "" || *prefix == "" || *keys < 1 {
		return errors.New("usage: kafka-counts --brokers HOST:PORT --input TOPIC --output TOPIC --keys K --prefix TXNPREFIX")
	}
	k := *keys
	// The connector's log goes to the runner's log (stderr): with the
	// franz-go clients' transactions (debug) unless benchmarking.
	log := zerolog.New(os.Stderr).With().Timestamp().Str("job", "kafka-counts").Logger().Level(zerolog.DebugLevel)
	if *bounded {
		log = log.Level(zerolog.InfoLevel)
	}
	srcOpts := []kafka.SourceOption{kafka.Topics(*input), kafka.GroupID(*prefix), kafka.SourceLogger(log)}
	if *bounded {
		srcOpts = append(srcOpts, kafka.BoundedBy(kafka.Latest()))
	} else {
		srcOpts = append(srcOpts, kafka.PartitionDiscovery(200*time.Millisecond))
	}
	guarantee := kafka.ExactlyOnce
	if *atLeastOnce {
		guarantee = kafka.AtLeastOnce
	}
	src, err := kafka.NewSource([]string{*brokers}, func(r *kgo.Record) (int64, error) {
		return strconv.ParseInt(string(r.Value), 10, 64)
	}, srcOpts...)
	if err != nil {
		return err
	}
	nums := kafka.Add(env, src, stream.SourceWatermarks{MaxOutOfOrderness: time.Second}, "Kafka Numbers").Uid("numbers")
	counted := stream.KeyedProcess(stream.KeyBy(nums, func(n int64) int64 { return n % k }),
		stream.KeyedProcessFunction[int64, int64, codec.Tuple2[int64, int64]]{
			ProcessElement: func(ctx *stream.KeyedContext[int64], n int64, out stream.Collector[codec.Tuple2[int64, int64]]) error {
				c, _ := kafkaCount.Value(ctx)
				c++
				kafkaCount.Update(ctx, c)
				out.Collect(codec.Tuple2[int64, int64]{F0: ctx.CurrentKey(), F1: c})
				return nil
			},
		}).Name("Count").Uid("count")
	sink, err := kafka.Sink(counted, []string{*brokers}, *output, func(t codec.Tuple2[int64, int64]) *kgo.Record {
		// The same formatting as the plain loop of bench-kafka.
		ks := strconv.FormatInt(t.F0, 10)
		return &kgo.Record{Key: []byte(ks), Value: []byte(ks + " " + strconv.FormatInt(t.F1, 10))}
	}, kafka.WithDeliveryGuarantee(guarantee), kafka.TransactionalIDPrefix(*prefix), kafka.SinkLogger(log))
	if err != nil {
		return err
	}
	sink.Name("Kafka Counts").Uid("counts")
	return nil
}
