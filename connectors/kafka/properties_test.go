package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka property names reach the clients as the franz-go options they
// name; an unknown name or a bad value is an error, not ignored.
func TestClientProperties(t *testing.T) {
	var c clientOptions
	c.property("linger.ms", "20")
	c.property("fetch.max.bytes", "1048576")
	c.property("compression.type", "zstd")
	if c.err != nil {
		t.Fatal(c.err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, c.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.ProducerLinger); got != 20*time.Millisecond {
		t.Errorf("linger.ms=20 gave ProducerLinger %v", got)
	}
	if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(1048576) {
		t.Errorf("fetch.max.bytes=1048576 gave FetchMaxBytes %v", got)
	}

	for _, tc := range []struct {
		key, value string
		unknown    bool
	}{{"no.such.property", "1", true}, {"linger.ms", "soon", false}, {"compression.type", "brotli", false}, {"batch.size", "0", false}} {
		var c clientOptions
		c.property(tc.key, tc.value)
		if c.err == nil || errors.Is(c.err, ErrUnknownProperty) != tc.unknown {
			t.Errorf("%s=%s: error %v (unknown: want %v)", tc.key, tc.value, c.err, tc.unknown)
		}
	}
	if _, err := NewSource([]string{"127.0.0.1:1"}, intValue, Topics("t"), SourceProperty("fetch.max.byte", "1")); !errors.Is(err, ErrUnknownProperty) {
		t.Errorf("NewSource with a misspelt property: %v, want ErrUnknownProperty", err)
	}
}
