package kafkatest

import (
	"strings"
	"testing"
	"time"
)

// TestOwnBrokerRestartKeepsItsData starts a broker of the test's own,
// writes records, restarts it on the same port and reads them back.
func TestOwnBrokerRestartKeepsItsData(t *testing.T) {
	b := StartOwnBroker(t)
	topic := Topic(t, b.Addr(), "own", 1)
	if err := ProduceNumbers(b.Addr(), topic, 1, 0, 10); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	got := ReadCommitted(t, b.Addr(), topic, 10, time.Minute)
	if strings.Join(got, ",") != "0,1,2,3,4,5,6,7,8,9" {
		t.Fatalf("after the restart the topic holds %v", got)
	}
}
