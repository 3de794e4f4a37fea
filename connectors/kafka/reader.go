package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/stream/source"
)

// fetchBatch is how many records PollNext emits at once, so that the task
// gets back to checkpoints and other inputs between batches.
const fetchBatch = 1024

// fetchWait is how long PollNext waits for the fetcher when it has no
// records: short, as the task's goroutine does nothing else meanwhile
// (checkpoint triggers wait at most that long).
const fetchWait = 5 * time.Millisecond

// reader reads its partitions through one franz-go client. A fetcher
// goroutine (owned by the reader, stopped by Close) polls the client and
// hands batches to PollNext over a small channel, so the task's goroutine
// never blocks on the network (Flink's SplitFetcher).
type reader[T any] struct {
	cfg  sourceConfig
	de   func(*kgo.Record) (T, error)
	rctx source.ReaderContext

	cl     *kgo.Client
	splits map[string]*PartitionSplit // by SplitID; StartingOffset is the next offset
	// ids caches SplitID by partition: formatting it cost a Sprintf
	// per record.
	ids map[topicPartition]string
	// wait bounds PollNext's wait for a fetch (reused).
	wait    *time.Timer
	toAdd   []PartitionSplit // splits added before Start
	noMore  bool
	fetches chan kgo.Fetches
	// runs are the fetched records not emitted yet, a run per partition:
	// a run looks its split and output up once, not per record.
	runs   []partitionRun
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// offsets taken at each checkpoint, committed to the group when it
	// completes; committing runs on its own goroutine.
	pendingCommits map[int64]map[string]map[int32]int64
	commits        chan map[string]map[int32]int64
}

func newReader[T any](cfg sourceConfig, de func(*kgo.Record) (T, error), rctx source.ReaderContext) *reader[T] {
	return &reader[T]{cfg: cfg, de: de, rctx: rctx, splits: map[string]*PartitionSplit{}, pendingCommits: map[int64]map[string]map[int32]int64{}}
}

func (r *reader[T]) Start() error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.cfg.brokers...),
		// An empty direct assignment: partitions come with AddSplits.
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.WithLogger(clientLogger{r.cfg.log}),
	}
	if r.cfg.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(append(opts, r.cfg.client.opts...)...)
	if err != nil {
		return fmt.Errorf("kafka: reader client: %w", err)
	}
	r.cl = cl
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.fetches = make(chan kgo.Fetches, 2)
	r.wg.Add(1)
	go r.fetch()
	if r.cfg.groupID != "" {
		r.commits = make(chan map[string]map[int32]int64, 16)
		r.wg.Add(1)
		go r.commitLoop()
	}
	add := r.toAdd
	r.toAdd = nil
	r.AddSplits(add)
	return nil
}

func (r *reader[T]) fetch() {
	defer r.wg.Done()
	for {
		// Whole fetches: the client fetches again once its buffered one
		// is taken, so taking it in small pieces left the broker idle
		// while the task worked through them (the channel holds two).
		fs := r.cl.PollFetches(r.ctx)
		if r.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		if fs.Empty() && len(fs.Errors()) == 0 {
			continue
		}
		select {
		case r.fetches <- fs:
		case <-r.ctx.Done():
			return
		}
	}
}

// commitLoop commits offsets to the group, newest first wins: a failed
// commit is only logged, as in Flink (the checkpoint is what counts).
func (r *reader[T]) commitLoop() {
	defer r.wg.Done()
	adm := kadm.NewClient(r.cl)
	for {
		select {
		case <-r.ctx.Done():
			return
		case offs := <-r.commits:
			os := kadm.Offsets{}
			for t, ps := range offs {
				for p, o := range ps {
					os.Add(kadm.Offset{Topic: t, Partition: p, At: o, LeaderEpoch: -1})
				}
			}
			ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
			_, err := adm.CommitOffsets(ctx, r.cfg.groupID, os)
			cancel()
			if err != nil && r.ctx.Err() == nil {
				r.cfg.log.Warn().Err(err).Str("group", r.cfg.groupID).Msg("kafka: committing offsets failed")
			}
		}
	}
}

func (r *reader[T]) AddSplits(splits []PartitionSplit) {
	if r.cl == nil {
		r.toAdd = append(r.toAdd, splits...)
		return
	}
	add := map[string]map[int32]kgo.Offset{}
	for _, sp := range splits {
		sp := sp
		if sp.StoppingOffset != NoStoppingOffset && sp.StartingOffset >= sp.StoppingOffset {
			continue // an empty bounded split
		}
		r.splits[sp.SplitID()] = &sp
		if add[sp.Topic] == nil {
			add[sp.Topic] = map[int32]kgo.Offset{}
		}
		add[sp.Topic][sp.Partition] = kgo.NewOffset().At(sp.StartingOffset)
	}
	r.cl.AddConsumePartitions(add)
}

func (r *reader[T]) NotifyNoMoreSplits()      { r.noMore = true }
func (r *reader[T]) HandleSourceEvent([]byte) {}

func (r *reader[T]) PollNext(output source.ReaderOutput[T]) (source.InputStatus, time.Time, error) {
	if len(r.runs) == 0 {
		if r.noMore && len(r.splits) == 0 {
			return source.EndOfInput, time.Time{}, nil
		}
		// Wait a little for the fetcher, rather than returning at once: the
		// task loop has no wake-up for a fetch, so NothingAvailable sleeps
		// until the time returned even when records arrive meanwhile, and
		// these sleeps capped the reader's throughput (bench-kafka).
		var fs kgo.Fetches
		select {
		case fs = <-r.fetches:
		default:
			if r.wait == nil {
				r.wait = time.NewTimer(fetchWait)
			} else {
				r.wait.Reset(fetchWait)
			}
			select {
			case fs = <-r.fetches:
				// Go 1.23+ timers: Stop leaves no stale tick for Reset
				// (draining C here would block for ever).
				r.wait.Stop()
			case <-r.wait.C:
				return source.NothingAvailable, time.Now().Add(fetchWait), nil
			}
		}
		for _, fe := range fs.Errors() {
			if fe.Err != nil && fe.Err != context.Canceled {
				r.cfg.log.Warn().Err(fe.Err).Str("topic", fe.Topic).Int32("partition", fe.Partition).Msg("kafka fetch error")
			}
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				r.runs = append(r.runs, partitionRun{topicPartition{p.Topic, p.Partition}, p.Records})
			}
		})
	}
	var finished map[string][]int32
	for budget := fetchBatch; budget > 0 && len(r.runs) > 0; {
		run := &r.runs[0]
		id := r.splitID(run.tp)
		sp := r.splits[id]
		var out source.SplitOutput[T]
		n := 0
		for n < len(run.recs) && n < budget {
			rec := run.recs[n]
			n++
			if sp == nil || rec.Offset < sp.StartingOffset {
				continue // a removed split, or a record before a restored position
			}
			if sp.StoppingOffset != NoStoppingOffset && rec.Offset >= sp.StoppingOffset {
				continue
			}
			v, err := r.de(rec)
			if err != nil {
				r.consume(n)
				return 0, time.Time{}, fmt.Errorf("kafka: deserializing %s offset %d: %w", id, rec.Offset, err)
			}
			if out == nil {
				out = output.ForSplit(id)
			}
			out.Collect(v, rec.Timestamp.UnixMilli())
			sp.StartingOffset = rec.Offset + 1
			if sp.StoppingOffset != NoStoppingOffset && sp.StartingOffset >= sp.StoppingOffset {
				delete(r.splits, id)
				output.ReleaseSplit(id)
				if finished == nil {
					finished = map[string][]int32{}
				}
				finished[sp.Topic] = append(finished[sp.Topic], sp.Partition)
				sp = nil // the rest of the run is beyond the split
			}
		}
		budget -= n
		r.consume(n)
	}
	if finished != nil {
		r.cl.RemoveConsumePartitions(finished)
	}
	return source.MoreAvailable, time.Time{}, nil
}

// partitionRun is a partition's fetched records, in offset order.
type partitionRun struct {
	tp   topicPartition
	recs []*kgo.Record
}

// consume drops the first n records of the first run.
func (r *reader[T]) consume(n int) {
	run := &r.runs[0]
	run.recs = run.recs[n:]
	if len(run.recs) == 0 {
		run.recs = nil
		r.runs = r.runs[1:]
		if len(r.runs) == 0 {
			r.runs = nil
		}
	}
}

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

// splitID is the SplitID of partition tp.
func (r *reader[T]) splitID(tp topicPartition) string {
	id, ok := r.ids[tp]
	if !ok {
		if r.ids == nil {
			r.ids = map[topicPartition]string{}
		}
		id = PartitionSplit{Topic: tp.topic, Partition: tp.partition}.SplitID()
		r.ids[tp] = id
	}
	return id
}

func (r *reader[T]) SnapshotState(id int64) ([]PartitionSplit, error) {
	out := make([]PartitionSplit, 0, len(r.splits)+len(r.toAdd))
	offs := map[string]map[int32]int64{}
	for _, sp := range r.splits {
		out = append(out, *sp)
		if offs[sp.Topic] == nil {
			offs[sp.Topic] = map[int32]int64{}
		}
		offs[sp.Topic][sp.Partition] = sp.StartingOffset
	}
	out = append(out, r.toAdd...)
	if r.cfg.groupID != "" {
		r.pendingCommits[id] = offs
	}
	return out, nil
}

// NotifyCheckpointComplete commits the offsets of checkpoint id (and drops
// older ones) to the consumer group, off the task's goroutine.
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	offs, ok := r.pendingCommits[id]
	for c := range r.pendingCommits {
		if c <= id {
			delete(r.pendingCommits, c)
		}
	}
	if ok && r.commits != nil && len(offs) > 0 {
		select {
		case r.commits <- offs:
		default: // the committer is behind; a later checkpoint commits
		}
	}
	return nil
}

func (r *reader[T]) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	if r.cl != nil {
		r.cl.Close()
	}
	r.wg.Wait()
	return nil
}
