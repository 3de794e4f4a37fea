package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// Every reader, enumerator and producer goroutine stops with the job.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
