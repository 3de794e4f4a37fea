// Package kafkatest finds the Kafka broker that tests run against and makes
// topics on it.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBroker is where `make kafka` (scripts/kafka/run.sh) listens.
const DefaultBroker = "127.0.0.1:9092"

// Broker returns the test broker's host:port: $GOFL_TEST_KAFKA, else
// DefaultBroker. If nothing answers there the test fails under CI=true
// (where `make test` starts Kafka through scripts/kafka/with-kafka.sh) and
// skips elsewhere, so Kafka tests never pass by not running in CI.
func Broker(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("GOFL_TEST_KAFKA")
	if addr == "" {
		addr = DefaultBroker
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("GOFL_TEST_KAFKA=%q: want host:port", addr)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		msg := "Kafka is not reachable at " + addr + " (" + err.Error() + "); start it with `make kafka` " +
			"or run the tests through scripts/kafka/with-kafka.sh, or point GOFL_TEST_KAFKA at one"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so Kafka tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	c.Close()
	return addr
}

// Admin returns an admin client of the broker, closed when the test ends.
func Admin(t testing.TB, broker string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// Topic creates a topic with a unique name starting with prefix and the
// given number of partitions, waits until its leaders are known, and
// deletes it when the test ends.
func Topic(t testing.TB, broker, prefix string, partitions int32) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	adm := Admin(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No time retention: ProduceNumbers' timestamps are from 1970, and
	// the broker's retention check (30 s after it starts, then every 5
	// minutes) deleted every segment of such a topic, the active one
	// rolled first, so readers found records gone from the start.
	retention := "-1"
	resp, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"retention.ms": &retention}, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: creating topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	WaitPartitions(t, adm, name, partitions)
	return name
}

// WaitPartitions waits (up to a minute) until topic has n partitions,
// each with a leader.
func WaitPartitions(t testing.TB, adm *kadm.Client, topic string, n int32) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		md, err := adm.Metadata(ctx, topic)
		cancel()
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && int32(len(td.Partitions)) >= n {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Leader >= 0 && p.Err == nil
				}
				if ready {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: topic %s has not %d partitions with leaders after a minute (last error %v)", topic, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NumbersTimestampBase is the timestamp (ms) ProduceNumbers gives number 0;
// number i gets NumbersTimestampBase+i.
const NumbersTimestampBase = 1_000_000

// ProduceNumbers writes from..to-1 as decimal strings, number i to
// partition i % partitions with timestamp NumbersTimestampBase+i. It
// returns an error instead of failing, so any goroutine may call it.
func ProduceNumbers(broker, topic string, partitions, from, to int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i)),
			Timestamp: time.UnixMilli(int64(NumbersTimestampBase + i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("kafkatest: producing to %s: %w", topic, err)
	}
	return nil
}

// ReadCommitted reads topic from the start with isolation.level
// read_committed (an independent check of what a sink committed) until it
// has n records or wait passed, then one more second to catch records
// beyond n, and returns the values.
func ReadCommitted(t testing.TB, broker, topic string, n int, wait time.Duration) []string {
	t.Helper()
	recs := ReadCommittedRecords(t, broker, topic, n, wait)
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// ReadCommittedRecords is ReadCommitted returning the whole records.
func ReadCommittedRecords(t testing.TB, broker, topic string, n int, wait time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	poll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	for deadline := time.Now().Add(wait); len(out) < n && time.Now().Before(deadline); {
		poll()
	}
	poll()
	return out
}
