// Package network is gofl's data plane, the counterpart of Flink's Netty
// shuffle: result partitions a task writes into, input gates a task reads
// from, and a credit-based TCP transport between runner processes.
//
// # Producer side
//
// ShuffleEnvironment.CreateResultPartition registers a ResultPartition
// (Pipelined or Blocking) with one subpartition per consumer subtask. The
// task writes with Emit(subpartition, record), Broadcast(record),
// BroadcastEvent(event), Flush, Finish (EndOfPartition to every
// subpartition) and Release. Records are opaque bytes framed with a u32 big
// endian length prefix into fixed-size buffers (Config.BufferSize, 32 KiB)
// from the partition's bounded pool; a record larger than the space left
// continues in the next buffer(s). Emit blocks while the pool is exhausted —
// that is back pressure, measured as PartitionMetrics.BackPressuredTimeMs —
// and returns the partition context's error when it is cancelled, or
// ErrPartitionReleased after Release.
//
// The partition pool holds Config.BuffersPerPartition buffers, by default
// BuffersPerChannel*subpartitions + FloatingBuffersPerGate (Flink's output
// pool: 2 per subpartition + 8), at least subpartitions+1.
//
// Events (CheckpointBarrier, CancelCheckpointMarker, EndOfPartition,
// CustomEvent for kinds from 64 on) are in-band: BroadcastEvent first ships
// the partially filled buffer of every subpartition, then an event buffer,
// so events keep their order with the records. Event buffers are unpooled
// and small.
//
// Partially filled buffers are shipped on Flush, before events, and by one
// flusher goroutine per ShuffleEnvironment every Config.FlushTimeout
// (Flink's execution.buffer-timeout, 100 ms; FlushAlways ships after every
// record, FlushNever disables it). A flush finishes the buffer; the next
// record starts a new one (Flink 1.5+ instead lets the consumer read a
// buffer still being written).
//
// Pipelined subpartitions queue finished buffers in memory until the
// consumer takes them; the pool bounds the queue. A pipelined partition is
// released once every subpartition delivered EndOfPartition. Blocking
// subpartitions append finished buffers to a file under Config.SpillDir (one
// directory per partition, one file per subpartition), recycling the
// buffer at once; after Finish the files can be read any number of times,
// also after the producing task ended, until Release deletes them.
//
// ResultPartitionManager is the runner's registry; CreateSubpartitionView
// returns a *PartitionNotFoundError (errors.Is ErrPartitionNotFound)
// carrying the ID for an unknown or released partition.
//
// # Consumer side
//
// ShuffleEnvironment.CreateInputGate creates an InputGate with one channel
// per InputChannelSpec: a local channel when the producer is this runner
// (the view's buffers are handed over, no copy), a remote channel
// otherwise. InputGate.Next returns BufferOrEvent; InputGate.NextRecord
// returns RecordOrEvent (record bytes valid until the next call, or an
// event, each with its channel index). Both return io.EOF once every
// channel delivered EndOfPartition. BlockChannel/UnblockChannel hold back a
// channel during checkpoint barrier alignment. A request for a partition
// that is not registered yet is retried with doubling backoff
// (PartitionRequestInitialBackoff .. MaxBackoff); then the channel fails
// with a *ChannelError wrapping *PartitionNotFoundError.
//
// A remote channel whose producer cannot be reached — the connect is
// refused, times out (Config.ConnectTimeout, also for the handshake) or is
// closed before the handshake — or whose connection breaks (EOF, reset)
// before it received EndOfPartition fails with a
// *PartitionConnectionError (Flink's PartitionConnectionException) for
// its own partition, also when several channels share the connection.
// Both errors are PartitionExceptions and match ErrPartitionNotFound: the
// task reports partition-data-missing and the JobMaster reruns the
// producer. A channel that received EndOfPartition ignores the connection
// closing; a protocol violation or this runner's own shutdown is no
// PartitionException.
//
// # Priority events (unaligned checkpoints)
//
// ResultPartition.EmitPriorityEvent puts an event ahead of the buffers
// queued in a pipelined subpartition (after earlier priority events and
// after leading buffers that continue a record begun in a consumed buffer,
// so no record is split) and returns copies of the overtaken buffers: the
// output's in-flight data. The server sends a priority event without
// credit (wire flag 2); the receiving remote channel keeps it apart from
// its received buffers and appends a position marker behind them.
// InputGate.PollPriority, Next and NextRecord return priority events first
// (Priority set), also ahead of the rest of the buffer being read, and the
// marker later in order (Position set): what the channel delivers between
// the two was overtaken. A local channel fetches the event from the head
// of the subpartition (PriorityAvailable signals it); its marker follows at
// once. A reader blocked elsewhere waits on PriorityAvailable.
//
// # Credit-based flow control
//
// A remote channel owns BuffersPerChannel exclusive buffers, announced as
// initial credit in its PartitionRequest. Each BufferResponse carries the
// sender's backlog; the channel then tries to hold backlog+exclusive free
// buffers, taking floating buffers from the gate's pool of
// FloatingBuffersPerGate (or waiting for one to be recycled) and announcing
// each as AddCredit. The server sends a buffer only while the receiver has
// credit; a buffer recycled by the consumer becomes new credit (a floating
// one goes back to the gate's pool when the channel no longer needs it). A
// slow consumer therefore stops its producer with bounded memory at both
// ends: PoolStats expose the counters (Allocated never exceeds Size).
//
// # Transport
//
// ConnectionManager runs one TCP server per runner and keeps at most one
// client connection per remote address, multiplexing every remote channel
// to that address by receiver id. Each connection has one reader and one
// writer goroutine; writers batch frames in a bufio.Writer and flush only
// when they run out of work. The wire format is documented in protocol.go.
// Nothing from the network is trusted: the magic/version handshake, frame
// lengths (MaxFrameSize), frame types, receiver ids, credits, sequence
// numbers, record lengths (MaxRecordSize) and event encodings are checked;
// a violation closes the connection with a logged *ProtocolError and fails
// the channels on it, while the server keeps serving other peers.
//
// # Concurrency
//
// Writer methods of a partition and Next/NextRecord of a gate belong to
// the task's goroutine; everything else is safe for concurrent use. Every
// goroutine is owned: the flusher by the ShuffleEnvironment, the accept
// loop and the connection goroutines by the ConnectionManager; Close stops
// and waits for them. Loggers are injected (zerolog).
package network
