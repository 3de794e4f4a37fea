package network

import (
	"crypto/tls"
	"fmt"
	"time"
)

// Config configures the data plane of one runner process. The zero value of a
// field means "use the default" (see DefaultConfig); negative FlushTimeout
// disables the periodic flush.
type Config struct {
	// BufferSize is the size of one network buffer (Flink's
	// taskmanager.memory.segment-size). Default 32 KiB.
	BufferSize int
	// BuffersPerChannel is the number of exclusive buffers of each remote
	// input channel, announced as initial credit
	// (taskmanager.network.memory.buffers-per-channel). Default 2.
	BuffersPerChannel int
	// FloatingBuffersPerGate is the number of floating buffers an input gate
	// shares among its remote channels, handed out by sender backlog
	// (taskmanager.network.memory.floating-buffers-per-gate). Default 8;
	// negative means none.
	FloatingBuffersPerGate int
	// BuffersPerPartition bounds the buffer pool of a result partition. 0
	// derives it like Flink's output pool: 2 per subpartition + 8 floating
	// (BuffersPerChannel*subpartitions + FloatingBuffersPerGate). It is
	// never below subpartitions+1, so every subpartition can hold a buffer
	// under construction while one is in flight.
	BuffersPerPartition int
	// FlushTimeout is Flink's execution.buffer-timeout: partially filled
	// buffers are shipped at least this often. One goroutine per
	// ShuffleEnvironment flushes every registered partition; there is no
	// goroutine per subpartition. 0 means the default (100 ms); use
	// FlushAlways to ship after every record and FlushNever to ship only
	// full buffers and on Flush/BroadcastEvent/Finish.
	FlushTimeout time.Duration
	// SpillDir holds the files of blocking partitions. Default os.TempDir().
	SpillDir string
	// ConnectTimeout bounds dialing a remote runner's data port and its
	// handshake. Default 120 s, as Flink's
	// taskmanager.network.netty.client.connectTimeoutSec: a job's data
	// port is opened by its TaskManager before the runner serves it, so a
	// connection may wait for a runner that is still fetching the job
	// binary; a runner that dies is reported by its TaskManager, whose
	// failover cancels the waiting consumers sooner.
	ConnectTimeout time.Duration
	// MaxFrameSize bounds the payload of a frame accepted from a peer.
	// Default BufferSize + 64 (a buffer plus its BufferResponse header).
	MaxFrameSize int
	// MaxRecordSize bounds a record reassembled from several buffers
	// (records larger than a buffer span buffers). Default 256 MiB.
	MaxRecordSize int
	// PartitionRequestInitialBackoff / MaxBackoff are Flink's
	// taskmanager.network.request-backoff.initial/max: a request for a
	// partition that is not (yet) registered is retried with doubling
	// backoff until the max is exceeded, then the channel fails with
	// PartitionNotFoundError. Defaults 100 ms / 10 s; a negative max
	// disables retries.
	PartitionRequestInitialBackoff time.Duration
	PartitionRequestMaxBackoff     time.Duration
	// TLS, if set, is internal mutual TLS (security.ssl.internal.*) on
	// every data connection, both as server and as client; nil: plain
	// TCP.
	TLS *tls.Config
}

const (
	// FlushAlways ships a buffer after every record (Flink's buffer-timeout 0).
	FlushAlways time.Duration = -1
	// FlushNever disables the periodic flush (Flink's buffer-timeout -1).
	FlushNever time.Duration = -2
)

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

func (c Config) withDefaults() Config {
	if c.BufferSize == 0 {
		c.BufferSize = 32 * 1024
	}
	if c.BuffersPerChannel == 0 {
		c.BuffersPerChannel = 2
	}
	if c.FloatingBuffersPerGate == 0 {
		c.FloatingBuffersPerGate = 8
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = 100 * time.Millisecond
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 120 * time.Second
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = c.BufferSize + 64
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = 256 << 20
	}
	if c.PartitionRequestInitialBackoff == 0 {
		c.PartitionRequestInitialBackoff = 100 * time.Millisecond
	}
	if c.PartitionRequestMaxBackoff == 0 {
		c.PartitionRequestMaxBackoff = 10 * time.Second
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.BufferSize < 64:
		return fmt.Errorf("network: BufferSize %d < 64", c.BufferSize)
	case c.BuffersPerChannel < 1:
		return fmt.Errorf("network: BuffersPerChannel %d < 1", c.BuffersPerChannel)
	case c.MaxFrameSize < c.BufferSize+frameHeaderSize+bufferResponseHeaderSize:
		return fmt.Errorf("network: MaxFrameSize %d smaller than a buffer frame (%d)", c.MaxFrameSize, c.BufferSize+frameHeaderSize+bufferResponseHeaderSize)
	}
	return nil
}

// partitionPoolSize is the buffer pool bound of a partition with n
// subpartitions.
func (c Config) partitionPoolSize(n int) int {
	size := c.BuffersPerPartition
	if size == 0 {
		size = c.BuffersPerChannel*n + c.floating()
	}
	if size < n+1 {
		size = n + 1
	}
	return size
}

func (c Config) floating() int { return max(c.FloatingBuffersPerGate, 0) }
