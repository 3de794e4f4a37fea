package ha

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/gofl/gofl/storage"
)

// zkJobGraphStore: each graph is a file in <storageDir>/<cluster>/jobgraphs
// and <base>/jobgraphs/<job-id> holds its path (Flink's
// ZooKeeperStateHandleStore: state in storageDir, pointers in ZooKeeper).
type zkJobGraphStore struct{ s *zkServices }

func (g *zkJobGraphStore) node(jobID string) string { return path.Join(g.s.base, "jobgraphs", jobID) }

func (g *zkJobGraphStore) PutJobGraph(ctx context.Context, session SessionID, jobID string, graph []byte) error {
	if err := validKey("job id", jobID); err != nil {
		return err
	}
	if _, err := g.s.fence(session); err != nil {
		return err // before writing a file nobody would point to
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	file := path.Join(g.s.fsBase, "jobgraphs", jobID+"-"+hex.EncodeToString(rnd[:]))
	if _, err := storage.WriteFileAtomic(ctx, g.s.fs, file, bytes.NewReader(graph)); err != nil {
		return fmt.Errorf("ha: writing the job graph of %s to %s: %w", jobID, g.s.fs.URI(file), err)
	}
	node := g.node(jobID)
	if err := g.s.ensurePath(path.Dir(node)); err != nil {
		g.removeFile(file)
		return err
	}
	old, stat, err := g.s.conn.Get(node)
	var op any = &zk.CreateRequest{Path: node, Data: []byte(file), Acl: zk.WorldACL(zk.PermAll)}
	switch {
	case err == nil:
		op = &zk.SetDataRequest{Path: node, Data: []byte(file), Version: stat.Version}
	case !errors.Is(err, zk.ErrNoNode):
		g.removeFile(file)
		return g.s.zkErr("get", node, err)
	}
	if err := g.s.fencedMulti(session, op); err != nil {
		g.removeFile(file)
		return err
	}
	if len(old) > 0 {
		g.removeFile(string(old))
	}
	return nil
}

// removeFile deletes a file nobody points to (best effort: an orphan only
// costs space).
func (g *zkJobGraphStore) removeFile(file string) {
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.ConnectionTimeout)
	defer cancel()
	if err := g.s.fs.RemoveAll(ctx, file); err != nil {
		g.s.log.Warn().Err(err).Str("file", g.s.fs.URI(file)).Msg("ha: cannot delete an unreferenced job graph file")
	}
}

func (g *zkJobGraphStore) RecoverJobGraph(ctx context.Context, jobID string) ([]byte, error) {
	if err := validKey("job id", jobID); err != nil {
		return nil, err
	}
	node := g.node(jobID)
	file, _, err := g.s.conn.Get(node)
	if err != nil {
		return nil, g.s.zkErr("get", node, err)
	}
	data, err := storage.ReadFile(ctx, g.s.fs, string(file))
	if err != nil {
		return nil, fmt.Errorf("ha: job graph of %s at %s: %w", jobID, g.s.fs.URI(string(file)), err)
	}
	return data, nil
}

func (g *zkJobGraphStore) RemoveJobGraph(_ context.Context, session SessionID, jobID string) error {
	if err := validKey("job id", jobID); err != nil {
		return err
	}
	node := g.node(jobID)
	file, stat, err := g.s.conn.Get(node)
	if errors.Is(err, zk.ErrNoNode) {
		_, ferr := g.s.fence(session)
		return ferr
	}
	if err != nil {
		return g.s.zkErr("get", node, err)
	}
	if err := g.s.fencedMulti(session, &zk.DeleteRequest{Path: node, Version: stat.Version}); err != nil {
		return err
	}
	g.removeFile(string(file))
	return nil
}

func (g *zkJobGraphStore) JobIDs(context.Context) ([]string, error) {
	dir := path.Join(g.s.base, "jobgraphs")
	ids, _, err := g.s.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, g.s.zkErr("children", dir, err)
	}
	sort.Strings(ids)
	return ids, nil
}

// zkCheckpointStore: <base>/checkpoints/<job-id>/<19-digit id> holds the
// JSON of a CompletedCheckpoint (Flink's ZooKeeperCompletedCheckpointStore
// points to a handle in storageDir; the _metadata a gofl checkpoint writes
// is that handle already).
type zkCheckpointStore struct {
	s   *zkServices
	dir string
	max int

	mu  sync.Mutex
	cps []CompletedCheckpoint
}

func (s *zkServices) CompletedCheckpointStore(_ context.Context, jobID string, maxRetained int) (CompletedCheckpointStore, error) {
	if err := validKey("job id", jobID); err != nil {
		return nil, err
	}
	if maxRetained < 1 {
		return nil, fmt.Errorf("%w: maxRetained %d (want >= 1)", ErrInvalid, maxRetained)
	}
	c := &zkCheckpointStore{s: s, dir: path.Join(s.base, "checkpoints", jobID), max: maxRetained}
	names, _, err := s.conn.Children(c.dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, s.zkErr("children", c.dir, err)
	}
	for _, n := range names {
		data, _, err := s.conn.Get(path.Join(c.dir, n))
		if errors.Is(err, zk.ErrNoNode) {
			continue // subsumed meanwhile
		}
		if err != nil {
			return nil, s.zkErr("get", path.Join(c.dir, n), err)
		}
		var cp CompletedCheckpoint
		if err := json.Unmarshal(data, &cp); err != nil {
			return nil, fmt.Errorf("ha: checkpoint pointer %s: %w", path.Join(c.dir, n), err)
		}
		c.cps = append(c.cps, cp)
	}
	sort.Slice(c.cps, func(i, j int) bool { return c.cps[i].ID < c.cps[j].ID })
	// More than retained can be stored if retention was lowered; the next
	// AddCheckpoint drops them.
	return c, nil
}

func (c *zkCheckpointStore) node(id int64) string { return path.Join(c.dir, fmt.Sprintf("%019d", id)) }

func (c *zkCheckpointStore) AddCheckpoint(_ context.Context, session SessionID, cp CompletedCheckpoint) ([]CompletedCheckpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkNewer(c.cps, cp); err != nil {
		return nil, err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, err
	}
	if err := c.s.ensurePath(c.dir); err != nil {
		return nil, err
	}
	kept, subsumed := retain(append(slices.Clone(c.cps), cp), c.max)
	ops := []any{&zk.CreateRequest{Path: c.node(cp.ID), Data: data, Acl: zk.WorldACL(zk.PermAll)}}
	for _, old := range subsumed {
		ops = append(ops, &zk.DeleteRequest{Path: c.node(old.ID), Version: -1})
	}
	if err := c.s.fencedMulti(session, ops...); err != nil {
		return nil, err
	}
	c.cps = kept
	return subsumed, nil
}

func (c *zkCheckpointStore) Latest() (CompletedCheckpoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cps) == 0 {
		return CompletedCheckpoint{}, false
	}
	return c.cps[len(c.cps)-1], true
}

func (c *zkCheckpointStore) All() []CompletedCheckpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cps)
}

func (c *zkCheckpointStore) Clear(_ context.Context, session SessionID) ([]CompletedCheckpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := []any{}
	for _, cp := range c.cps {
		ops = append(ops, &zk.DeleteRequest{Path: c.node(cp.ID), Version: -1})
	}
	if len(ops) == 0 {
		_, err := c.s.fence(session)
		return nil, err
	}
	if err := c.s.fencedMulti(session, ops...); err != nil {
		return nil, err
	}
	out := c.cps
	c.cps = nil
	return out, nil
}

// zkCounter is <base>/checkpoint-id-counter/<job-id>, the next id in
// decimal, updated by versioned compare-and-set (Flink's
// ZooKeeperCheckpointIDCounter over Curator's SharedCount).
type zkCounter struct {
	s    *zkServices
	node string
}

func (s *zkServices) CheckpointIDCounter(jobID string) CheckpointIDCounter {
	return &zkCounter{s: s, node: path.Join(s.base, "checkpoint-id-counter", jobID)}
}

// read returns the next id and the node's version; a missing node is
// created (fenced) with 1.
func (c *zkCounter) read(session *SessionID) (int64, int32, error) {
	for {
		data, stat, err := c.s.conn.Get(c.node)
		if err == nil {
			n, perr := strconv.ParseInt(string(data), 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("ha: checkpoint id counter %s holds %q", c.node, data)
			}
			return n, stat.Version, nil
		}
		if !errors.Is(err, zk.ErrNoNode) || session == nil {
			if errors.Is(err, zk.ErrNoNode) {
				return 1, -1, nil
			}
			return 0, 0, c.s.zkErr("get", c.node, err)
		}
		if err := c.s.ensurePath(path.Dir(c.node)); err != nil {
			return 0, 0, err
		}
		err = c.s.fencedMulti(*session, &zk.CreateRequest{Path: c.node, Data: []byte("1"), Acl: zk.WorldACL(zk.PermAll)})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return 0, 0, err
		}
	}
}

func (c *zkCounter) GetAndIncrement(ctx context.Context, session SessionID) (int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, version, err := c.read(&session)
		if err != nil {
			return 0, err
		}
		err = c.s.fencedMulti(session, &zk.SetDataRequest{Path: c.node, Data: []byte(strconv.FormatInt(n+1, 10)), Version: version})
		if errors.Is(err, zk.ErrBadVersion) {
			continue // another writer won the compare-and-set
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

func (c *zkCounter) Get(context.Context) (int64, error) {
	n, _, err := c.read(nil)
	return n, err
}

func (c *zkCounter) SetCount(ctx context.Context, session SessionID, next int64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, version, err := c.read(&session)
		if err != nil {
			return err
		}
		err = c.s.fencedMulti(session, &zk.SetDataRequest{Path: c.node, Data: []byte(strconv.FormatInt(next, 10)), Version: version})
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
}

func (c *zkCounter) Remove(_ context.Context, session SessionID) error {
	err := c.s.fencedMulti(session, &zk.DeleteRequest{Path: c.node, Version: -1})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
