package network

import (
	"errors"
	"fmt"
	"sync"
)

// ErrPartitionNotFound is matched (errors.Is) by every PartitionException:
// PartitionNotFoundError and PartitionConnectionError.
var ErrPartitionNotFound = errors.New("partition not found")

// PartitionNotFoundError says that a requested partition is not registered
// at the producer's runner (never produced there, or already released). The
// JobMaster classifies it as partition-data-missing.
type PartitionNotFoundError struct {
	ID           ResultPartitionID
	Subpartition int
	// Remote is the producer's data address for a remote request.
	Remote string
}

func (e *PartitionNotFoundError) Error() string {
	if e.Remote != "" {
		return fmt.Sprintf("partition not found: %s (subpartition %d) at %s", e.ID, e.Subpartition, e.Remote)
	}
	return fmt.Sprintf("partition not found: %s (subpartition %d)", e.ID, e.Subpartition)
}

func (e *PartitionNotFoundError) Is(target error) bool { return target == ErrPartitionNotFound }

// ConsumedPartition implements PartitionException.
func (e *PartitionNotFoundError) ConsumedPartition() InputChannelSpec {
	return InputChannelSpec{Partition: e.ID, Subpartition: e.Subpartition, Address: e.Remote}
}

// ResultPartitionManager is the registry of a runner's result partitions; it
// serves subpartition views to local input channels and to the data server.
type ResultPartitionManager struct {
	mu         sync.RWMutex
	partitions map[ResultPartitionID]*ResultPartition
	closed     bool
}

// NewResultPartitionManager returns an empty registry.
func NewResultPartitionManager() *ResultPartitionManager {
	return &ResultPartitionManager{partitions: map[ResultPartitionID]*ResultPartition{}}
}

// Register adds a partition; its Release unregisters it.
func (m *ResultPartitionManager) Register(p *ResultPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("network: partition manager shut down")
	}
	if _, ok := m.partitions[p.id]; ok {
		return fmt.Errorf("network: partition %q already registered", p.id)
	}
	m.partitions[p.id] = p
	p.onFree = m.unregister
	return nil
}

func (m *ResultPartitionManager) unregister(p *ResultPartition) {
	m.mu.Lock()
	if m.partitions[p.id] == p {
		delete(m.partitions, p.id)
	}
	m.mu.Unlock()
}

// Partition returns a registered partition.
func (m *ResultPartitionManager) Partition(id ResultPartitionID) (*ResultPartition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.partitions[id]
	return p, ok
}

// CreateSubpartitionView opens a view on one subpartition. An unknown ID
// gives a *PartitionNotFoundError carrying it.
func (m *ResultPartitionManager) CreateSubpartitionView(id ResultPartitionID, subpartition int, listener func()) (SubpartitionView, error) {
	m.mu.RLock()
	p, ok := m.partitions[id]
	m.mu.RUnlock()
	if !ok || p.IsReleased() {
		return nil, &PartitionNotFoundError{ID: id, Subpartition: subpartition}
	}
	if subpartition < 0 || subpartition >= len(p.subs) {
		return nil, fmt.Errorf("network: partition %q has %d subpartitions, requested %d", id, len(p.subs), subpartition)
	}
	v, err := p.subs[subpartition].createView(listener)
	if errors.Is(err, ErrPartitionReleased) {
		return nil, &PartitionNotFoundError{ID: id, Subpartition: subpartition}
	}
	return v, err
}

// ReleasePartition releases and unregisters a partition (no-op if unknown).
func (m *ResultPartitionManager) ReleasePartition(id ResultPartitionID) {
	if p, ok := m.Partition(id); ok {
		p.Release()
	}
}

// Partitions returns the registered partitions.
func (m *ResultPartitionManager) Partitions() []*ResultPartition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*ResultPartition, 0, len(m.partitions))
	for _, p := range m.partitions {
		out = append(out, p)
	}
	return out
}

// Shutdown releases every partition.
func (m *ResultPartitionManager) Shutdown() {
	m.mu.Lock()
	m.closed = true
	ps := make([]*ResultPartition, 0, len(m.partitions))
	for _, p := range m.partitions {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.Release()
	}
}
