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
	_, err := fmt.Fprintln(txn.w, v)
	return err
}

// PreCommit closes the in-progress file and renames it to a pending one
// named after the checkpoint.
func (s *textTxnSink[T]) PreCommit(ctx *SinkContext, txn *textTxn) error {
	if txn.w == nil {
		txn.Empty = true
		return nil
	}
	err := txn.w.Flush()
	if cerr := txn.f.Close(); err == nil {
		err = cerr
	}
	txn.f, txn.w = nil, nil
	if err != nil {
		return err
	}
	id := ctx.CheckpointID()
	txn.Pending = fmt.Sprintf(".part-%d-%d.pending", ctx.SubtaskIndex(), id)
	txn.Final = fmt.Sprintf("part-%d-%d", ctx.SubtaskIndex(), id)
	return s.fs.Rename(context.Background(), path.Join(s.root, txn.InProgress), path.Join(s.root, txn.Pending))
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
