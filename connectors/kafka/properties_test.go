package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/stream"
)

// Kafka client properties become the franz-go options they name, and the
// franz-go options given directly win over them.
func TestClientProperties(t *testing.T) {
	src, err := NewSource([]string{"127.0.0.1:1"}, intValue, Topics("t"),
		SourceProperty("fetch.max.wait.ms", "250"), SourceProperty("max.partition.fetch.bytes", "4096"),
		SourceProperty("client.id", "a"), SourceClientOptions(kgo.ClientID("b")))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, src.cfg.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, c := range []struct {
		opt  any
		want any
	}{{kgo.FetchMaxWait, 250 * time.Millisecond}, {kgo.FetchMaxPartitionBytes, int32(4096)}, {kgo.ClientID, "b"}} {
		if got := cl.OptValue(c.opt); got != c.want {
			t.Errorf("%T: %v, want %v", c.opt, got, c.want)
		}
	}

	env := stream.NewEnvironment()
	nums := Add(env, src, stream.SourceWatermarks{}, "kafka")
	ser := func(v int) *kgo.Record { return &kgo.Record{} }
	sink := &kafkaSink[int]{cfg: sinkConfig{brokers: []string{"127.0.0.1:1"}, topic: "out"}}
	sink.cfg.opts, err = clientOptions(producerProperties, map[string]string{"linger.ms": "20", "acks": "1", "enable.idempotence": "false"})
	if err != nil {
		t.Fatal(err)
	}
	pcl, err := kgo.NewClient(sink.baseOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if got := pcl.OptValue(kgo.ProducerLinger); got != 20*time.Millisecond {
		t.Errorf("linger %v, want 20ms over the sink's default", got)
	}

	if _, err := NewSource([]string{"b"}, intValue, Topics("t"), SourceProperty("auto.offset.reset", "earliest")); !errors.Is(err, ErrUnknownProperty) {
		t.Errorf("an unknown consumer property: %v, want ErrUnknownProperty", err)
	}
	if _, err := Sink(nums, []string{"b"}, "out", ser, SinkProperty("linger.ms", "soon")); err == nil {
		t.Error("linger.ms=soon accepted")
	}
	if _, err := Sink(nums, []string{"b"}, "out", ser, WithDeliveryGuarantee(ExactlyOnce), TransactionalIDPrefix("p"),
		SinkProperty("acks", "1")); err == nil {
		t.Error("exactly once with acks=1 accepted")
	}
}
