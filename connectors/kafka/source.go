package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/source"
)

// ErrNoTopics is returned by a source with neither topics nor a pattern.
var ErrNoTopics = errors.New("kafka: no topics or topic pattern")

// Special offsets of a PartitionSplit's StartingOffset, resolved by the
// enumerator before it assigns the split.
const (
	// EarliestOffset starts at the partition's first retained record.
	EarliestOffset int64 = -2
	// LatestOffset starts after the partition's last record.
	LatestOffset int64 = -1
	// NoStoppingOffset marks an unbounded split.
	NoStoppingOffset int64 = -1
)

// OffsetsInitializer tells where a partition starts (or, for a bounded
// source, stops): Flink's OffsetsInitializer.
type OffsetsInitializer struct {
	kind      int
	timestamp int64
	fallback  *OffsetsInitializer
}

const (
	offEarliest = iota
	offLatest
	offTimestamp
	offCommitted
)

// Earliest starts at each partition's first retained record.
func Earliest() OffsetsInitializer { return OffsetsInitializer{kind: offEarliest} }

// Latest starts after each partition's last record (only new records).
func Latest() OffsetsInitializer { return OffsetsInitializer{kind: offLatest} }

// Timestamp starts at the first record with a timestamp at or after ms
// (milliseconds since the epoch); partitions with none start at the end.
func Timestamp(ms int64) OffsetsInitializer {
	return OffsetsInitializer{kind: offTimestamp, timestamp: ms}
}

// Committed starts at the consumer group's committed offsets (WithGroupID),
// partitions without one at fallback's offset.
func Committed(fallback OffsetsInitializer) OffsetsInitializer {
	return OffsetsInitializer{kind: offCommitted, fallback: &fallback}
}

// PartitionSplit is one Kafka partition: Flink's KafkaPartitionSplit.
// StartingOffset is the next offset to read (the position, updated in the
// reader's checkpoints); StoppingOffset bounds it (exclusive) or is
// NoStoppingOffset.
type PartitionSplit struct {
	Topic          string
	Partition      int32
	StartingOffset int64
	StoppingOffset int64
}

// SplitID is "topic-partition", as Flink's.
func (s PartitionSplit) SplitID() string { return fmt.Sprintf("%s-%d", s.Topic, s.Partition) }

// EnumeratorState is the enumerator's checkpoint: the partitions already
// assigned, so a restore assigns only partitions discovered later (which
// start at the earliest offset).
type EnumeratorState struct {
	Assigned []string
}

// Source is a Kafka source: build it with NewSource and add it with
// stream.FromSource (or Add).
type Source[T any] struct {
	cfg sourceConfig
	de  func(*kgo.Record) (T, error)
}

type sourceConfig struct {
	brokers       []string
	topics        []string
	pattern       *regexp.Regexp
	starting      OffsetsInitializer
	stopping      *OffsetsInitializer
	discovery     time.Duration
	groupID       string
	readCommitted bool
	client        clientOptions
	log           zerolog.Logger
}

// SourceOption configures a Source.
type SourceOption func(*sourceConfig)

// Topics reads these topics.
func Topics(topics ...string) SourceOption {
	return func(c *sourceConfig) { c.topics = append(c.topics, topics...) }
}

// TopicPattern reads every topic whose name matches re (found again at
// each partition discovery).
func TopicPattern(re *regexp.Regexp) SourceOption { return func(c *sourceConfig) { c.pattern = re } }

// StartingOffsets sets where partitions found at start begin (default
// Earliest); partitions discovered later begin at their earliest offset.
func StartingOffsets(o OffsetsInitializer) SourceOption {
	return func(c *sourceConfig) { c.starting = o }
}

// BoundedBy makes the source bounded: each partition ends at the offset o
// gives at start (e.g. Latest()), and no partitions are discovered later.
func BoundedBy(o OffsetsInitializer) SourceOption { return func(c *sourceConfig) { c.stopping = &o } }

// PartitionDiscovery looks for new partitions (and, with a pattern, new
// topics) every interval; 0 turns it off. Default 30s (Flink's
// partition.discovery.interval.ms).
func PartitionDiscovery(interval time.Duration) SourceOption {
	return func(c *sourceConfig) { c.discovery = interval }
}

// GroupID is the consumer group whose committed offsets Committed reads
// and to which the readers commit their offsets when a checkpoint
// completes (for monitoring: the checkpoint is what a restore uses).
func GroupID(id string) SourceOption { return func(c *sourceConfig) { c.groupID = id } }

// ReadCommitted reads only committed records of transactional producers
// (isolation.level=read_committed).
func ReadCommitted() SourceOption { return func(c *sourceConfig) { c.readCommitted = true } }

// SourceLogger logs through l.
func SourceLogger(l zerolog.Logger) SourceOption { return func(c *sourceConfig) { c.log = l } }

// NewSource returns a source reading brokers with deserialize turning each
// record into a value. Records carry their Kafka timestamp as event time.
func NewSource[T any](brokers []string, deserialize func(*kgo.Record) (T, error), opts ...SourceOption) (*Source[T], error) {
	c := sourceConfig{brokers: brokers, starting: Earliest(), discovery: 30 * time.Second, log: zerolog.Nop()}
	for _, o := range opts {
		o(&c)
	}
	if len(c.topics) == 0 && c.pattern == nil {
		return nil, ErrNoTopics
	}
	if c.client.err != nil {
		return nil, c.client.err
	}
	if c.starting.kind == offCommitted && c.groupID == "" {
		return nil, errors.New("kafka: Committed starting offsets need a GroupID")
	}
	return &Source[T]{cfg: c, de: deserialize}, nil
}

// Add adds the source to env: FromSource with the records' Kafka
// timestamps as event time and wm's watermarks per partition.
func Add[T any](env *stream.Environment, src *Source[T], wm stream.SourceWatermarks, name string) stream.DataStream[T] {
	return stream.FromSource[T](env, src, wm, name)
}

// LocalEnumeration marks the source as assigning partitions by push to a
// fixed owner (see stream.LocallyEnumerable).
func (s *Source[T]) LocalEnumeration() {}

// Boundedness implements source.Source.
func (s *Source[T]) Boundedness() source.Boundedness {
	if s.cfg.stopping != nil {
		return source.Bounded
	}
	return source.ContinuousUnbounded
}

// CreateEnumerator implements source.Source.
func (s *Source[T]) CreateEnumerator(ctx source.SplitEnumeratorContext[PartitionSplit]) (source.SplitEnumerator[PartitionSplit, EnumeratorState], error) {
	return &enumerator{cfg: s.cfg, ctx: ctx, assigned: map[string]bool{}, resolving: map[string]bool{}}, nil
}

// RestoreEnumerator implements source.Source.
func (s *Source[T]) RestoreEnumerator(ctx source.SplitEnumeratorContext[PartitionSplit], st EnumeratorState) (source.SplitEnumerator[PartitionSplit, EnumeratorState], error) {
	e := &enumerator{cfg: s.cfg, ctx: ctx, assigned: map[string]bool{}, resolving: map[string]bool{}, restored: true}
	for _, id := range st.Assigned {
		e.assigned[id] = true
	}
	return e, nil
}

// MergeEnumeratorStates rebuilds the enumerator's state after a restore
// from the readers' splits (stream.EnumeratorStateMerger): every subtask
// runs a copy of the enumerator, and only a partition's owner really
// assigned it, so the assigned partitions are those some reader had. A
// bounded source also keeps what any copy assigned, so that finished
// partitions are not read again.
func (s *Source[T]) MergeEnumeratorStates(states []EnumeratorState, splits []PartitionSplit) EnumeratorState {
	seen := map[string]bool{}
	var out EnumeratorState
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out.Assigned = append(out.Assigned, id)
		}
	}
	for _, sp := range splits {
		add(sp.SplitID())
	}
	if s.cfg.stopping != nil {
		for _, st := range states {
			for _, id := range st.Assigned {
				add(id)
			}
		}
	}
	sort.Strings(out.Assigned)
	return out
}

// CreateReader implements source.Source.
func (s *Source[T]) CreateReader(ctx source.ReaderContext) (source.SourceReader[T, PartitionSplit], error) {
	return newReader(s.cfg, s.de, ctx), nil
}

// SplitOwner is the reader subtask of a partition, as Flink's
// KafkaSourceEnumerator.getSplitOwner: a topic's partitions go round robin
// from a start index derived from the topic's name.
func SplitOwner(topic string, partition int32, parallelism int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	start := int(h.Sum32()&0x7fffffff) % parallelism
	return (start + int(partition)) % parallelism
}

// enumerator discovers partitions off the coordinator's goroutine and
// assigns each new one to its owner.
type enumerator struct {
	cfg      sourceConfig
	ctx      source.SplitEnumeratorContext[PartitionSplit]
	adm      *kadm.Client
	cl       *kgo.Client
	assigned map[string]bool
	// resolving are new partitions whose offsets are being resolved.
	resolving map[string]bool
	// restored or after the first discovery, new partitions start at the
	// earliest offset.
	restored   bool
	discovered bool
	// allAssigned: a bounded source assigned every split; a reader that
	// registers again after its reset is told so once more.
	allAssigned bool
}

func (e *enumerator) Start() error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.cfg.brokers...)}, e.cfg.client.opts...)...)
	if err != nil {
		return fmt.Errorf("kafka: enumerator client: %w", err)
	}
	e.cl, e.adm = cl, kadm.NewClient(cl)
	period := e.cfg.discovery
	if e.cfg.stopping != nil {
		period = 0
	}
	e.ctx.CallAsync(e.discover, e.handleDiscovery, 0, period)
	return nil
}

// discovery is the result of one discovery: new splits by owner.
type discovery struct {
	splits []PartitionSplit
}

// discover lists the partitions and resolves the offsets of new ones. It
// runs off the coordinator's goroutine and so reads only what does not
// change: the known partitions are passed in by value below.
func (e *enumerator) discover() (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var md kadm.Metadata
	var err error
	if e.cfg.pattern != nil {
		md, err = e.adm.Metadata(ctx)
	} else {
		md, err = e.adm.Metadata(ctx, e.cfg.topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: partition discovery: %w", err)
	}
	var found []PartitionSplit
	for name, td := range md.Topics {
		if td.Err != nil || td.IsInternal {
			continue
		}
		if e.cfg.pattern != nil && !e.cfg.pattern.MatchString(name) {
			continue
		}
		for p := range td.Partitions {
			found = append(found, PartitionSplit{Topic: name, Partition: p, StoppingOffset: NoStoppingOffset})
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].Topic != found[j].Topic {
			return found[i].Topic < found[j].Topic
		}
		return found[i].Partition < found[j].Partition
	})
	return discovery{splits: found}, nil
}

// discoveryRetry is the pause before a bounded source's enumerator, which
// discovers once, tries a failed discovery again.
const discoveryRetry = time.Second

// retryBounded schedules discovery again when none is periodic (a bounded
// source): else a transient failure at start left it without splits for
// ever. A periodic discovery retries at its next run.
func (e *enumerator) retryBounded() {
	if e.cfg.stopping != nil {
		e.ctx.CallAsync(e.discover, e.handleDiscovery, discoveryRetry, 0)
	}
}

func (e *enumerator) handleDiscovery(v any, err error) {
	if err != nil {
		e.cfg.log.Warn().Err(err).Msg("kafka partition discovery failed; retrying")
		e.retryBounded()
		return
	}
	var fresh []PartitionSplit
	for _, sp := range v.(discovery).splits {
		if id := sp.SplitID(); !e.assigned[id] && !e.resolving[id] {
			fresh = append(fresh, sp)
		}
	}
	if len(fresh) == 0 && e.discovered {
		return
	}
	initial := !e.restored && !e.discovered
	e.discovered = true
	// Resolving offsets is I/O: do it async too, then assign.
	e.ctx.CallAsync(func() (any, error) { return e.resolve(fresh, initial) },
		func(v any, err error) {
			for _, sp := range fresh {
				delete(e.resolving, sp.SplitID())
			}
			if err != nil {
				e.cfg.log.Warn().Err(err).Msg("kafka: resolving starting offsets failed; retrying at the next discovery")
				if initial {
					// The retry starts them where the source starts,
					// not at the earliest offset of later partitions.
					e.discovered = false
				}
				e.retryBounded()
				return
			}
			splits := v.([]PartitionSplit)
			for _, sp := range splits {
				e.assigned[sp.SplitID()] = true
				e.cfg.log.Info().Str("split", sp.SplitID()).Int64("starting_offset", sp.StartingOffset).
					Int64("stopping_offset", sp.StoppingOffset).Msg("kafka source: assigning a new partition")
			}
			e.assign(splits)
		}, 0, 0)
	// Resolving splits are not in the checkpoint until assigned: a restore
	// discovers them again.
	for _, sp := range fresh {
		e.resolving[sp.SplitID()] = true
	}
}

// resolve turns the initializers into offsets for splits.
func (e *enumerator) resolve(splits []PartitionSplit, initial bool) ([]PartitionSplit, error) {
	if len(splits) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := Earliest()
	if initial {
		start = e.cfg.starting
	}
	out := make([]PartitionSplit, len(splits))
	copy(out, splits)
	if err := e.offsets(ctx, out, start, func(sp *PartitionSplit, o int64) { sp.StartingOffset = o }); err != nil {
		return nil, err
	}
	if e.cfg.stopping != nil {
		if err := e.offsets(ctx, out, *e.cfg.stopping, func(sp *PartitionSplit, o int64) { sp.StoppingOffset = o }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *enumerator) offsets(ctx context.Context, splits []PartitionSplit, init OffsetsInitializer, set func(*PartitionSplit, int64)) error {
	topics := map[string]bool{}
	for _, sp := range splits {
		topics[sp.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	var listed kadm.ListedOffsets
	var err error
	switch init.kind {
	case offEarliest:
		listed, err = e.adm.ListStartOffsets(ctx, names...)
	case offLatest:
		listed, err = e.adm.ListEndOffsets(ctx, names...)
	case offTimestamp:
		listed, err = e.adm.ListOffsetsAfterMilli(ctx, init.timestamp, names...)
	case offCommitted:
		fetched, ferr := e.adm.FetchOffsets(ctx, e.cfg.groupID)
		if ferr != nil {
			return fmt.Errorf("kafka: committed offsets of group %s: %w", e.cfg.groupID, ferr)
		}
		var rest []int
		for i := range splits {
			if o, ok := fetched.Lookup(splits[i].Topic, splits[i].Partition); ok && o.Err == nil && o.At >= 0 {
				set(&splits[i], o.At)
			} else {
				rest = append(rest, i)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		sub := make([]PartitionSplit, len(rest))
		for j, i := range rest {
			sub[j] = splits[i]
		}
		if err := e.offsets(ctx, sub, *init.fallback, set); err != nil {
			return err
		}
		for j, i := range rest {
			splits[i] = sub[j]
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafka: listing offsets: %w", err)
	}
	for i := range splits {
		o, ok := listed.Lookup(splits[i].Topic, splits[i].Partition)
		if !ok || o.Err != nil {
			return fmt.Errorf("kafka: no offset for %s: %v", splits[i].SplitID(), o.Err)
		}
		set(&splits[i], o.Offset)
	}
	return nil
}

// assign hands new splits to their owners; a bounded source has no more.
func (e *enumerator) assign(splits []PartitionSplit) {
	e.assignToOwners(splits)
	if e.cfg.stopping != nil {
		e.allAssigned = true
		for i := 0; i < e.ctx.CurrentParallelism(); i++ {
			e.ctx.SignalNoMoreSplits(i)
		}
	}
}

func (e *enumerator) assignToOwners(splits []PartitionSplit) {
	p := e.ctx.CurrentParallelism()
	byOwner := map[int][]PartitionSplit{}
	for _, sp := range splits {
		o := SplitOwner(sp.Topic, sp.Partition, p)
		byOwner[o] = append(byOwner[o], sp)
	}
	e.ctx.AssignSplits(byOwner)
}

func (e *enumerator) HandleSplitRequest(int, string)       {}
func (e *enumerator) HandleSourceEvent(int, []byte)        {}
func (e *enumerator) NotifyCheckpointComplete(int64) error { return nil }

// AddReader tells a bounded source's reader that registers again after
// its reset that no split follows the ones it gets back (AddSplitsBack).
func (e *enumerator) AddReader(sub int) {
	if e.allAssigned {
		e.ctx.SignalNoMoreSplits(sub)
	}
}

// AddSplitsBack assigns a failed reader's splits again (to the same owner:
// the assignment is fixed).
func (e *enumerator) AddSplitsBack(splits []PartitionSplit, _ int) { e.assignToOwners(splits) }

func (e *enumerator) SnapshotState(int64) (EnumeratorState, error) {
	st := EnumeratorState{Assigned: make([]string, 0, len(e.assigned))}
	for id := range e.assigned {
		st.Assigned = append(st.Assigned, id)
	}
	sort.Strings(st.Assigned)
	return st, nil
}

func (e *enumerator) Close() error {
	if e.cl != nil {
		e.cl.Close()
	}
	return nil
}
