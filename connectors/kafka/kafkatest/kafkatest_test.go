package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerRoundTrip checks that the test broker takes and returns a
// record, so a broken start script fails here first.
func TestBrokerRoundTrip(t *testing.T) {
	broker := Broker(t)
	topic := Topic(t, broker, "kafkatest", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record back: %v", err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) != "hello" {
				t.Fatalf("got %q, want hello", r.Value)
			}
			return
		}
	}
}
