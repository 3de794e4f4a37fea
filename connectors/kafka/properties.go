package kafka

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnknownProperty is returned for a Kafka client property the connector
// does not translate to franz-go.
var ErrUnknownProperty = errors.New("kafka: unsupported client property")

// Kafka client properties (Flink's KafkaSourceBuilder.setProperty,
// KafkaSinkBuilder.setKafkaProducerConfig) and the franz-go options they
// become. Anything else franz-go offers goes through SourceClientOptions
// and SinkClientOptions.
var (
	consumerProperties = map[string]func(string) (kgo.Opt, error){
		"client.id": func(v string) (kgo.Opt, error) { return kgo.ClientID(v), nil },
		"fetch.max.wait.ms": func(v string) (kgo.Opt, error) {
			ms, err := strconv.ParseInt(v, 10, 32)
			return kgo.FetchMaxWait(time.Duration(ms) * time.Millisecond), err
		},
		"fetch.min.bytes":           int32Property(kgo.FetchMinBytes),
		"fetch.max.bytes":           int32Property(kgo.FetchMaxBytes),
		"max.partition.fetch.bytes": int32Property(kgo.FetchMaxPartitionBytes),
		"isolation.level": func(v string) (kgo.Opt, error) {
			switch v {
			case "read_committed":
				return kgo.FetchIsolationLevel(kgo.ReadCommitted()), nil
			case "read_uncommitted":
				return kgo.FetchIsolationLevel(kgo.ReadUncommitted()), nil
			}
			return nil, fmt.Errorf("want read_committed or read_uncommitted, not %q", v)
		},
	}
	producerProperties = map[string]func(string) (kgo.Opt, error){
		"client.id": func(v string) (kgo.Opt, error) { return kgo.ClientID(v), nil },
		"linger.ms": func(v string) (kgo.Opt, error) {
			ms, err := strconv.ParseInt(v, 10, 32)
			return kgo.ProducerLinger(time.Duration(ms) * time.Millisecond), err
		},
		"batch.size": int32Property(func(n int32) kgo.ProducerOpt { return kgo.ProducerBatchMaxBytes(n) }),
		"compression.type": func(v string) (kgo.Opt, error) {
			c, ok := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
				"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[v]
			if !ok {
				return nil, fmt.Errorf("want none, gzip, snappy, lz4 or zstd, not %q", v)
			}
			return kgo.ProducerBatchCompression(c), nil
		},
		"acks": func(v string) (kgo.Opt, error) {
			switch v {
			case "all", "-1":
				return kgo.RequiredAcks(kgo.AllISRAcks()), nil
			case "1":
				return kgo.RequiredAcks(kgo.LeaderAck()), nil
			case "0":
				return kgo.RequiredAcks(kgo.NoAck()), nil
			}
			return nil, fmt.Errorf("want all, -1, 1 or 0, not %q", v)
		},
		"enable.idempotence": func(v string) (kgo.Opt, error) {
			on, err := strconv.ParseBool(v)
			if err != nil || on {
				return nil, err // on is franz-go's default
			}
			return kgo.DisableIdempotentWrite(), nil
		},
		"max.in.flight.requests.per.connection": func(v string) (kgo.Opt, error) {
			n, err := strconv.Atoi(v)
			return kgo.MaxProduceRequestsInflightPerBroker(n), err
		},
	}
)

// int32Property parses a property of bytes into opt.
func int32Property[O kgo.Opt](opt func(int32) O) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		n, err := strconv.ParseInt(v, 10, 32)
		return opt(int32(n)), err
	}
}

// clientOptions translates props with table, in key order (a later
// option of the same kind wins in franz-go, so the order must be stable).
func clientOptions(table map[string]func(string) (kgo.Opt, error), props map[string]string) ([]kgo.Opt, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var opts []kgo.Opt
	for _, k := range keys {
		f, ok := table[k]
		if !ok {
			known := make([]string, 0, len(table))
			for n := range table {
				known = append(known, n)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("%w %q (known: %s; use the ClientOptions options for others)", ErrUnknownProperty, k, strings.Join(known, ", "))
		}
		o, err := f(props[k])
		if err != nil {
			return nil, fmt.Errorf("kafka: property %s=%q: %w", k, props[k], err)
		}
		if o != nil {
			opts = append(opts, o)
		}
	}
	return opts, nil
}
