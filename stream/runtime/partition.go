package runtime

// Partitioner routes records of one output to the subpartitions (consumer
// subtasks) of its result. Watermarks and end-of-partition always go to every
// subpartition. A Partitioner belongs to one producer subtask.
type Partitioner interface {
	// Select returns the subpartition of r among n, or -1 for all of them.
	Select(r Record, n int) int
}

// Forward sends everything to the only subpartition (the consumer subtask
// with the producer's index; the edge is POINTWISE).
type Forward struct{}

// Select implements Partitioner.
func (Forward) Select(Record, int) int { return 0 }

// Broadcast sends every record to every subpartition.
type Broadcast struct{}

// Select implements Partitioner.
func (Broadcast) Select(Record, int) int { return -1 }

// Rebalance distributes records round-robin, starting at the producer's
// subtask index so parallel producers do not all start at subpartition 0.
type Rebalance struct{ next int }

// NewRebalance returns a round-robin partitioner for producer subtask.
func NewRebalance(subtask int) *Rebalance { return &Rebalance{next: subtask} }

// Select implements Partitioner.
func (p *Rebalance) Select(_ Record, n int) int {
	p.next %= n
	s := p.next
	p.next++
	return s
}

// KeyGroupPartitioner hashes the record's key into a key group and sends the
// record to the consumer subtask owning that key group.
type KeyGroupPartitioner struct {
	KeyOf func(v any) any
	// HashOf, when set, is HashKey(KeyOf(v)) computed without boxing the
	// key (KeyHasher): the typed hot path. KeyOf is used otherwise.
	HashOf         func(v any) uint64
	MaxParallelism int
}

// Select implements Partitioner.
func (p KeyGroupPartitioner) Select(r Record, n int) int {
	var h uint64
	if p.HashOf != nil {
		h = p.HashOf(r.Value)
	} else {
		h = HashKey(p.KeyOf(r.Value))
	}
	return OperatorIndex(int(h%uint64(p.MaxParallelism)), p.MaxParallelism, n)
}
