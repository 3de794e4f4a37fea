package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnknownProperty is returned for a client property this connector does
// not translate (pass the franz-go option with SourceClientOptions or
// SinkClientOptions instead).
var ErrUnknownProperty = errors.New("kafka: unknown client property")

// clientProps are the Kafka client properties (the names Flink's Kafka
// connector passes through to its clients) that map to a franz-go option.
// The connector's own settings (group.id, isolation.level,
// transaction.timeout.ms, partition.discovery.interval.ms) are set by the
// source's and sink's options of their own.
var clientProps = map[string]func(v string) (kgo.Opt, error){
	"client.id":                          func(v string) (kgo.Opt, error) { return kgo.ClientID(v), nil },
	"socket.connection.setup.timeout.ms": msOpt(kgo.DialTimeout),
	"metadata.max.age.ms":                msOpt(kgo.MetadataMaxAge),
	"retry.backoff.ms": msOpt(func(d time.Duration) kgo.Opt {
		return kgo.RetryBackoffFn(func(int) time.Duration { return d })
	}),
	// Producer.
	"linger.ms":           msOpt(func(d time.Duration) kgo.Opt { return kgo.ProducerLinger(d) }),
	"delivery.timeout.ms": msOpt(func(d time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(d) }),
	"batch.size":          bytesOpt(func(b int32) kgo.Opt { return kgo.ProducerBatchMaxBytes(b) }),
	"compression.type": func(v string) (kgo.Opt, error) {
		codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
			"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
		c, ok := codecs[strings.ToLower(v)]
		if !ok {
			return nil, fmt.Errorf("want none, gzip, snappy, lz4 or zstd")
		}
		return kgo.ProducerBatchCompression(c), nil
	},
	// Consumer.
	"fetch.max.bytes":           bytesOpt(func(b int32) kgo.Opt { return kgo.FetchMaxBytes(b) }),
	"fetch.min.bytes":           bytesOpt(func(b int32) kgo.Opt { return kgo.FetchMinBytes(b) }),
	"max.partition.fetch.bytes": bytesOpt(func(b int32) kgo.Opt { return kgo.FetchMaxPartitionBytes(b) }),
	"fetch.max.wait.ms":         msOpt(func(d time.Duration) kgo.Opt { return kgo.FetchMaxWait(d) }),
}

func msOpt(opt func(time.Duration) kgo.Opt) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("want milliseconds, a whole number ≥ 0")
		}
		return opt(time.Duration(ms) * time.Millisecond), nil
	}
}

func bytesOpt(opt func(int32) kgo.Opt) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		b, err := strconv.ParseInt(v, 10, 32)
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("want a byte count > 0")
		}
		return opt(int32(b)), nil
	}
}

// clientOptions collects the franz-go options of a source's or sink's
// clients and the first bad property.
type clientOptions struct {
	opts []kgo.Opt
	err  error
}

func (c *clientOptions) property(key, value string) {
	mk, ok := clientProps[key]
	if !ok {
		c.fail(fmt.Errorf("%w %q", ErrUnknownProperty, key))
		return
	}
	o, err := mk(value)
	if err != nil {
		c.fail(fmt.Errorf("kafka: client property %s=%q: %w", key, value, err))
		return
	}
	c.opts = append(c.opts, o)
}

func (c *clientOptions) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// SourceProperty sets a Kafka consumer property by its Kafka name (as
// Flink's KafkaSource.setProperty), e.g. "fetch.max.bytes": see
// clientProps for the ones translated; any other is ErrUnknownProperty
// from NewSource.
func SourceProperty(key, value string) SourceOption {
	return func(c *sourceConfig) { c.client.property(key, value) }
}

// SourceClientOptions adds franz-go options to the source's clients (its
// readers' and its enumerator's), after the connector's own: any client
// setting, at the risk of overriding what the source relies on.
func SourceClientOptions(opts ...kgo.Opt) SourceOption {
	return func(c *sourceConfig) { c.client.opts = append(c.client.opts, opts...) }
}

// SinkProperty sets a Kafka producer property by its Kafka name (as
// Flink's KafkaSink.setProperty), e.g. "linger.ms" or "compression.type":
// see clientProps for the ones translated; any other is ErrUnknownProperty
// from Sink.
func SinkProperty(key, value string) SinkOption {
	return func(c *sinkConfig) { c.client.property(key, value) }
}

// SinkClientOptions adds franz-go options to the sink's producers, after
// the connector's own: any client setting, at the risk of overriding what
// the sink relies on (its transactional ID, acks=all for exactly once).
func SinkClientOptions(opts ...kgo.Opt) SinkOption {
	return func(c *sinkConfig) { c.client.opts = append(c.client.opts, opts...) }
}

// clientLogger passes a franz-go client's log to the connector's zerolog
// logger: warnings and errors, and franz-go's info (each transaction
// begun and ended, producer IDs initialized) when the logger is at debug
// level or lower.
type clientLogger struct{ log zerolog.Logger }

func (l clientLogger) Level() kgo.LogLevel {
	if lv := l.log.GetLevel(); lv <= zerolog.DebugLevel {
		return kgo.LogLevelInfo
	} else if lv == zerolog.Disabled {
		return kgo.LogLevelNone
	}
	return kgo.LogLevelWarn
}

func (l clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var e *zerolog.Event
	switch level {
	case kgo.LogLevelError:
		e = l.log.Error()
	case kgo.LogLevelWarn:
		e = l.log.Warn()
	default:
		e = l.log.Debug()
	}
	e.Fields(keyvals).Msg("franz-go: " + msg)
}
