package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// An incremental snapshot of the LSM engine is a pebble checkpoint: its
// files go to shared storage (OperatorSnapshot.SharedFiles) and a manifest
// naming them is keyed section lsmManifestSection, written in every key
// group of the subtask's range, so on a rescale every new subtask whose
// range overlaps the old one's gets it with that old subtask's key groups.
const (
	lsmManifestSection = "lsm:manifest"
	lsmManifestType    = "lsm-manifest/v1"
)

type lsmManifest struct {
	DB             string            `json:"db"`
	Checkpoint     int64             `json:"checkpoint"`
	MaxParallelism int               `json:"maxParallelism"`
	Start          int               `json:"start"`
	End            int               `json:"end"`
	Files          []lsmManifestFile `json:"files"`
}

type lsmManifestFile struct {
	// Name is the SharedStateFile name, File the file's name in the DB
	// directory.
	Name string `json:"name"`
	File string `json:"file"`
	Size int64  `json:"size"`
}

// isImmutable tells the DB's immutable files (tables and blob files),
// shared between checkpoints, from the per-checkpoint ones (MANIFEST,
// OPTIONS, markers).
func isImmutable(file string) bool {
	return strings.HasSuffix(file, ".sst") || strings.HasSuffix(file, ".blob")
}

// sharedName is "<operator>-<subtask>-<db>-<file>" for an immutable file
// (the name it was restored with, if it was), and
// "<operator>-<subtask>-<db>-chk<id>-<file>" for the others.
func (e *lsmEngine) sharedName(file string, id int64) string {
	if isImmutable(file) {
		if n, ok := e.names[file]; ok {
			return n
		}
		return fmt.Sprintf("%s-%d-%s-%s", sanitize(e.opts.OperatorID), e.opts.SubtaskIndex, e.id, file)
	}
	return fmt.Sprintf("%s-%d-%s-chk%d-%s", sanitize(e.opts.OperatorID), e.opts.SubtaskIndex, e.id, id, file)
}

func (e *lsmEngine) snapshotIncremental(snap *OperatorSnapshot) (err error) {
	if snap.CheckpointID <= 0 {
		return fmt.Errorf("incremental snapshot: OperatorSnapshot.CheckpointID %d not set", snap.CheckpointID)
	}
	if err := e.db.Flush(); err != nil {
		return fmt.Errorf("incremental snapshot: flush: %w", err)
	}
	dir := e.nextDir(fmt.Sprintf("chk-%d", snap.CheckpointID))
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := e.db.Checkpoint(dir); err != nil {
		return fmt.Errorf("incremental snapshot: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("incremental snapshot: %w", err)
	}
	m := lsmManifest{DB: e.id, Checkpoint: snap.CheckpointID, MaxParallelism: e.maxPar, Start: e.start, End: e.end}
	p := &lsmPending{dir: dir}
	var shared []SharedStateFile
	for _, de := range ents {
		if de.IsDir() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return fmt.Errorf("incremental snapshot: %w", err)
		}
		f := de.Name()
		name := e.sharedName(f, snap.CheckpointID)
		m.Files = append(m.Files, lsmManifestFile{Name: name, File: f, Size: info.Size()})
		shared = append(shared, SharedStateFile{
			Name: name, LocalPath: filepath.Join(dir, f), Size: info.Size(),
			Uploaded: isImmutable(f) && e.uploaded[name],
		})
		if isImmutable(f) {
			p.names = append(p.names, name)
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("incremental snapshot: %w", err)
	}
	for g := e.start; g <= e.end; g++ {
		snap.PutKeyed(g, lsmManifestSection, lsmManifestType, data)
	}
	for name, typ := range e.types {
		snap.setType(stateSection(name), typ)
	}
	snap.SharedFiles = append(snap.SharedFiles, shared...)
	if old := e.pending[snap.CheckpointID]; old != nil {
		_ = os.RemoveAll(old.dir)
	}
	e.pending[snap.CheckpointID] = p
	return nil
}

// restore loads r: full-format "state:" sections are written into the DB
// as they are (decoded on read); each incremental manifest's DB is rebuilt
// from r.SharedFiles and, when it alone covers the subtask's key-group
// range, becomes the DB (keys outside the range deleted), else its keys in
// the range are copied into the DB.
func (e *lsmEngine) restore(r *OperatorRestore) error {
	e.mustOpen()
	for section, typ := range r.StateTypes {
		if name, ok := strings.CutPrefix(section, "state:"); ok {
			e.types[name] = typ
		}
	}
	manifests := map[string]*lsmManifest{}
	var order []string
	for g, sections := range r.Keyed {
		data, ok := sections[lsmManifestSection]
		if !ok {
			continue
		}
		if _, seen := manifests[string(data)]; seen {
			continue
		}
		m := &lsmManifest{}
		if err := json.Unmarshal(data, m); err != nil {
			return fmt.Errorf("restoring lsm state, key group %d: %w: %w", g, ErrCorruptState, err)
		}
		if m.MaxParallelism != e.maxPar {
			return fmt.Errorf("restoring lsm state: %w: written with max parallelism %d, now %d", ErrIncompatibleState, m.MaxParallelism, e.maxPar)
		}
		manifests[string(data)] = m
		order = append(order, string(data))
	}
	sort.Slice(order, func(i, j int) bool { return manifests[order[i]].Start < manifests[order[j]].Start })
	files := map[string]string{}
	for _, f := range r.SharedFiles {
		files[f.Name] = f.LocalPath
	}
	if len(order) == 1 {
		if m := manifests[order[0]]; m.Start <= e.start && m.End >= e.end {
			if err := e.adopt(m, files); err != nil {
				return err
			}
			order = nil
		}
	}
	for _, k := range order {
		if err := e.copyFrom(manifests[k], files); err != nil {
			return err
		}
	}
	return e.restoreSections(r)
}

// materialize rebuilds the DB directory of manifest m from the shared
// files (hard links when possible).
func (e *lsmEngine) materialize(m *lsmManifest, files map[string]string) (string, error) {
	dir := e.nextDir("restore")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("restoring lsm state: %w", err)
	}
	for _, f := range m.Files {
		src, ok := files[f.Name]
		if !ok {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("restoring lsm state of checkpoint %d: %w: %s", m.Checkpoint, ErrSharedFileMissing, f.Name)
		}
		if err := linkOrCopy(src, filepath.Join(dir, f.File)); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("restoring lsm state: %w", err)
		}
	}
	return dir, nil
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// adopt makes the DB of manifest m the backend's DB: its immutable files
// keep their shared names and count as uploaded (they are in a completed
// checkpoint); files the DB creates from now on are named after a new DB
// identity.
func (e *lsmEngine) adopt(m *lsmManifest, files map[string]string) error {
	dir, err := e.materialize(m, files)
	if err != nil {
		return err
	}
	if err := e.closeDB(); err != nil {
		return fmt.Errorf("restoring lsm state: %w", err)
	}
	names := map[string]string{}
	e.uploaded = map[string]bool{}
	for _, f := range m.Files {
		if isImmutable(f.File) {
			names[f.File] = f.Name
			e.uploaded[f.Name] = true
		}
	}
	if err := e.openAt(dir, newDBID(), names); err != nil {
		return err
	}
	// Rescaled to a part of the old range: drop the rest.
	if m.Start < e.start {
		if err := e.db.DeleteRange(groupBound(m.Start), groupBound(e.start), pebble.NoSync); err != nil {
			return fmt.Errorf("restoring lsm state: %w", err)
		}
	}
	if m.End > e.end {
		if err := e.db.DeleteRange(groupBound(e.end+1), groupBound(m.End+1), pebble.NoSync); err != nil {
			return fmt.Errorf("restoring lsm state: %w", err)
		}
	}
	return nil
}

// copyFrom opens the DB of manifest m read-only and copies the keys of the
// backend's key-group range into the DB.
func (e *lsmEngine) copyFrom(m *lsmManifest, files map[string]string) (err error) {
	lo, hi := max(m.Start, e.start), min(m.End, e.end)
	if lo > hi {
		return nil
	}
	dir, err := e.materialize(m, files)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src, err := pebble.Open(dir, e.pebbleOptions(true))
	if err != nil {
		return fmt.Errorf("restoring lsm state: open checkpoint %d: %w", m.Checkpoint, err)
	}
	defer func() {
		if cerr := src.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("restoring lsm state: %w", cerr)
		}
	}()
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: groupBound(lo), UpperBound: groupBound(hi + 1)})
	if err != nil {
		return fmt.Errorf("restoring lsm state: %w", err)
	}
	defer it.Close()
	batch := e.db.NewBatch()
	defer func() { _ = batch.Close() }()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("restoring lsm state: %w", err)
		}
		if err := batch.Set(it.Key(), v, nil); err != nil {
			return fmt.Errorf("restoring lsm state: %w", err)
		}
		if batch.Len() >= 1<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("restoring lsm state: %w", err)
			}
			batch.Reset()
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("restoring lsm state: %w", err)
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("restoring lsm state: %w", err)
	}
	return nil
}

// restoreSections writes the entries of full-format "state:" sections.
func (e *lsmEngine) restoreSections(r *OperatorRestore) error {
	batch := e.db.NewBatch()
	defer func() { _ = batch.Close() }()
	var k []byte
	for g, sections := range r.Keyed {
		for section, data := range sections {
			name, ok := strings.CutPrefix(section, "state:")
			if !ok {
				continue
			}
			err := rangeEntries(data, func(kb, vb []byte) error {
				k = append(appendStatePrefix(k[:0], g, name), kb...)
				return batch.Set(k, vb, nil)
			})
			if err != nil {
				return fmt.Errorf("restoring keyed state %q, key group %d: %w", name, g, err)
			}
		}
		if batch.Len() >= 1<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("restoring keyed state: %w", err)
			}
			batch.Reset()
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("restoring keyed state: %w", err)
	}
	return nil
}
