package stream

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"sync"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// textSinkSwitch is WriteAsText's operator: the plain part-file writer, or
// the transactional one when the job checkpoints (known only at Open).
type textSinkSwitch[T any] struct {
	plain  *textSinkOp
	txn    *twoPhaseCommitOp[T, *textTxn]
	active runtime.Operator
}

func (o *textSinkSwitch[T]) Open(ctx *runtime.Context) error {
	o.active = o.plain
	if ctx.Checkpointing || ctx.Restore != nil {
		o.active = o.txn
	}
	return o.active.Open(ctx)
}

func (o *textSinkSwitch[T]) ProcessElement(i int, r runtime.Record) error {
	return o.active.ProcessElement(i, r)
}
func (o *textSinkSwitch[T]) ProcessWatermark(int64) error { return nil }
func (o *textSinkSwitch[T]) Finish() error                { return o.active.Finish() }
func (o *textSinkSwitch[T]) Close() error {
	if o.active == nil {
		return nil
	}
	return o.active.Close()
}

// SnapshotState pre-commits the part file of the checkpoint interval.
func (o *textSinkSwitch[T]) SnapshotState(id int64, snap *runtime.OperatorSnapshot) error {
	if o.active != o.txn {
		return nil // a savepoint without periodic checkpoints: the output is already published
	}
	return o.txn.SnapshotState(id, snap)
}

// NotifyCheckpointComplete publishes the part files up to id.
func (o *textSinkSwitch[T]) NotifyCheckpointComplete(id int64) error {
	if o.active != o.txn {
		return nil
	}
	return o.txn.NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted keeps the pending part files for the next
// checkpoint.
func (o *textSinkSwitch[T]) NotifyCheckpointAborted(int64) error { return nil }

// textTxn is one checkpoint interval's part file. Names are relative to
// the sink's directory.
type textTxn struct {
	InProgress string
	Pending    string
	Final      string
	// Empty marks a transaction without records: no file.
	Empty bool

	f io.WriteCloser `codec:"-"`
	w *bufio.Writer  `codec:"-"`
}

var textTxnCodec = codec.MustFor[txnState[*textTxn]]()

// hiddenPart matches the hidden files of a transactional text sink:
// ".part-<subtask>-<n>.inprogress.<random>" and
// ".part-<subtask>-<checkpoint>.pending".
var hiddenPart = regexp.MustCompile(`^\.part-(\d+)-(\d+)\.(inprogress\.[0-9a-f]+|pending)$`)

// textTxnSink is WriteAsText with checkpointing, a TwoPhaseCommitSink.
type textTxnSink[T any] struct {
	dir     string
	fs      storage.FileSystem
	root    string
	seq     int64
	cleaned bool
	// unpersisted are the pre-committed files whose persist has not run:
	// Close closes them, for a snapshot that was never written.
	unpersisted openFiles
}

// errSinkClosed: a persist that ran after its sink closed.
var errSinkClosed = errors.New("stream: the sink closed before its pre-committed file was persisted")

// openFiles is a set of files shared by a sink's goroutine and the
// persists of its checkpoints.
type openFiles struct {
	mu     sync.Mutex
	files  map[io.Closer]bool
	closed bool
}

func (s *openFiles) add(f io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[io.Closer]bool{}
	}
	s.files[f] = true
}

// remove takes f out of the set; false when the set was closed first.
func (s *openFiles) remove(f io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	delete(s.files, f)
	return true
}

// closeAll closes the files still in the set, without making them
// durable: their checkpoints were not written.
func (s *openFiles) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for f := range s.files {
		f.Close()
	}
	s.files = nil
}

func (s *textTxnSink[T]) Open(*SinkContext) error {
	fs, root, err := openFileSystem(s.dir)
	if err != nil {
		return err
	}
	s.fs, s.root = fs, root
	return fs.MkdirAll(context.Background(), root)
}

func (s *textTxnSink[T]) Close() error {
	if s.fs == nil {
		return nil
	}
	s.unpersisted.closeAll()
	err := s.fs.Close()
	s.fs = nil
	return err
}

// cleanup removes the hidden files an earlier attempt left: every
// in-progress file, and pending files of checkpoints after the restored
// one (those up to it were committed from the restored state). Subtask i
// of p cleans the files of old subtasks j with j mod p = i, so no other
// subtask of this attempt writes them meanwhile.
func (s *textTxnSink[T]) cleanup(ctx *SinkContext) error {
	bg := context.Background()
	ents, err := s.fs.ReadDir(bg, s.root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		m := hiddenPart.FindStringSubmatch(e.Name)
		if m == nil || e.IsDir {
			continue
		}
		j, _ := strconv.Atoi(m[1])
		if j%ctx.Parallelism() != ctx.SubtaskIndex() {
			continue
		}
		if n, _ := strconv.ParseInt(m[2], 10, 64); m[3] == "pending" && n <= ctx.RestoredCheckpointID() {
			continue
		}
		if err := s.fs.RemoveAll(bg, e.Path); err != nil {
			return err
		}
	}
	return nil
}

func (s *textTxnSink[T]) BeginTransaction(ctx *SinkContext) (*textTxn, error) {
	if !s.cleaned {
		// After Open and the restored commits, before this attempt writes.
		if err := s.cleanup(ctx); err != nil {
			return nil, err
		}
		s.cleaned = true
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	s.seq++
	return &textTxn{InProgress: fmt.Sprintf(".part-%d-%d.inprogress.%s", ctx.SubtaskIndex(), s.seq, hex.EncodeToString(rnd[:]))}, nil
}

func (s *textTxnSink[T]) Write(_ *SinkContext, txn *textTxn, v T) error {
	if txn.w == nil {
		f, err := s.fs.Create(context.Background(), path.Join(s.root, txn.InProgress))
		if err != nil {
			return err
		}
		txn.f, txn.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	// Asserting on any(v) does not allocate; passing v to fmt would box
	// it again, once per record.
	if str, ok := any(v).(string); ok {
		return writeLine(txn.w, str)
	}
	_, err := fmt.Fprintln(txn.w, v)
	return err
}

// writeLine writes s and a newline, as fmt.Fprintln(w, s) does without
// fmt's cost: the text sinks' common case.
func writeLine(w *bufio.Writer, s string) error {
	w.WriteString(s)
	return w.WriteByte('\n')
}

// PreCommit closes the in-progress file and renames it to a pending one
// named after the checkpoint.
func (s *textTxnSink[T]) PreCommit(ctx *SinkContext, txn *textTxn) error {
	persist, err := s.PreCommitAsync(ctx, txn)
	if err != nil || persist == nil {
		return err
	}
	return persist()
}

// PreCommitAsync flushes the in-progress file and names its pending and
// final names; persist closes it (durably) and renames it to the pending
// name off the task's goroutine.
func (s *textTxnSink[T]) PreCommitAsync(ctx *SinkContext, txn *textTxn) (func() error, error) {
	if txn.w == nil {
		txn.Empty = true
		return nil, nil
	}
	f := txn.f
	err := txn.w.Flush()
	txn.f, txn.w = nil, nil
	if err != nil {
		f.Close()
		return nil, err
	}
	id := ctx.CheckpointID()
	txn.Pending = fmt.Sprintf(".part-%d-%d.pending", ctx.SubtaskIndex(), id)
	txn.Final = fmt.Sprintf("part-%d-%d", ctx.SubtaskIndex(), id)
	from, to := path.Join(s.root, txn.InProgress), path.Join(s.root, txn.Pending)
	fsys := s.fs
	s.unpersisted.add(f)
	return func() error {
		if !s.unpersisted.remove(f) {
			return errSinkClosed
		}
		if err := f.Close(); err != nil {
			return err
		}
		return fsys.Rename(context.Background(), from, to)
	}, nil
}

// Commit renames the pending file to its final name; already renamed is
// fine.
func (s *textTxnSink[T]) Commit(_ *SinkContext, txn *textTxn) error {
	if txn.Empty {
		return nil
	}
	bg := context.Background()
	err := s.fs.Rename(bg, path.Join(s.root, txn.Pending), path.Join(s.root, txn.Final))
	if errors.Is(err, storage.ErrNotFound) {
		if _, serr := s.fs.Stat(bg, path.Join(s.root, txn.Final)); serr == nil {
			return nil
		}
		return fmt.Errorf("committing %s: neither the pending nor the final file exists: %w", txn.Final, err)
	}
	return err
}

// Abort drops the in-progress file.
func (s *textTxnSink[T]) Abort(_ *SinkContext, txn *textTxn) error {
	if txn.f != nil {
		txn.f.Close()
		txn.f, txn.w = nil, nil
	}
	if txn.InProgress == "" || s.fs == nil {
		return nil
	}
	return s.fs.RemoveAll(context.Background(), path.Join(s.root, txn.InProgress))
}
