package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

// Sink is the end of a stream; its setters configure the sink operator.
type Sink struct {
	env *Environment
	n   *node
}

// Name names the sink.
func (s Sink) Name(name string) Sink { s.n.name = name; return s }

// Uid fixes the sink's operator ID.
func (s Sink) Uid(uid string) Sink { s.n.uid = uid; return s }

// SetParallelism sets the sink's parallelism.
func (s Sink) SetParallelism(n int) Sink {
	if n < 1 {
		s.env.fail(fmt.Errorf("sink %q: parallelism %d must be at least 1", s.n.name, n))
		return s
	}
	s.n.parallelism = n
	return s
}

// SlotSharingGroup puts the sink into a slot sharing group.
func (s Sink) SlotSharingGroup(g string) Sink { s.n.slotSharing = g; return s }

// DisableChaining keeps the sink out of any chain.
func (s Sink) DisableChaining() Sink { s.n.chaining = chainNever; return s }

func addSink[T any](s DataStream[T], kind, name string, newOp func() runtime.Operator) Sink {
	n := s.env.newNode(kind, name)
	n.newOperator = newOp
	n.inputs = []streamEdge{edgeOf(s, 0)}
	return Sink{env: s.env, n: n}
}

// Print writes every record with fmt.Sprint to the environment's stdout,
// prefixed with "<subtask>> " when the sink runs in parallel, as Flink's
// print().
func (s DataStream[T]) Print() Sink {
	env := s.env
	return addSink(s, "sink-print", "Print to Std. Out", func() runtime.Operator {
		return &printOp{w: env.stdout, mu: env.stdoutMu}
	})
}

type printOp struct {
	runtime.Base
	w      io.Writer
	mu     *sync.Mutex
	prefix string
}

func (o *printOp) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	if ctx.Parallelism > 1 {
		o.prefix = fmt.Sprintf("%d> ", ctx.SubtaskIndex+1)
	}
	return nil
}

func (o *printOp) ProcessElement(_ int, r runtime.Record) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := fmt.Fprintf(o.w, "%s%v\n", o.prefix, r.Value)
	return err
}

func (o *printOp) ProcessWatermark(int64) error { return nil }

// WriteAsText writes every record with fmt.Sprint, one per line, into the
// directory dir (a plain path, a file:// or an hdfs:// URI, as TextFile
// takes).
//
// Without checkpointing, there is one part file "part-<subtask>" per sink
// subtask, replacing one an earlier attempt left; it is complete (on HDFS:
// closed, its last block replicated) once its subtask FINISHED.
//
// With checkpointing it is exactly once, as Flink's FileSink: each subtask
// writes the records between two checkpoints into a hidden in-progress
// file ".part-<subtask>-<n>.inprogress.<random>", rolls it to a hidden
// pending file when the checkpoint is taken and renames it to
// "part-<subtask>-<checkpoint-id>" when the checkpoint completed; a
// restore commits the pending files of the restored checkpoint and removes
// the hidden files the failed attempt left. Readers see committed files
// only (TextFile skips names starting with "." or "_").
//
// As Flink's writers with WriteMode.NO_OVERWRITE, the job fails when it is
// submitted (Execute, ExecuteOn, `gofl run`) if dir exists and is not
// empty, so no stale part files of an earlier run mix with this one's; with
// Overwrite the directory is removed first instead. A job restoring a
// savepoint (execution.savepoint.path) keeps its directory as it is.
func (s DataStream[T]) WriteAsText(dir string, mode ...WriteMode) Sink {
	if err := checkFileURI(dir); err != nil {
		s.env.fail(fmt.Errorf("WriteAsText: %w", err))
	}
	sink := addSink(s, kindTextSink, "TextFile Sink", func() runtime.Operator {
		return &textSinkSwitch[T]{plain: &textSinkOp{dir: dir}, txn: &twoPhaseCommitOp[T, *textTxn]{sink: &textTxnSink[T]{dir: dir}, codec: textTxnCodec}}
	})
	sink.n.params["path"] = dir
	if slices.Contains(mode, Overwrite) {
		sink.n.params["writeMode"] = Overwrite.String()
	}
	return sink
}

type textSinkOp struct {
	runtime.Base
	dir string
	fs  storage.FileSystem
	f   io.WriteCloser
	w   *bufio.Writer
}

func (o *textSinkOp) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	fs, dir, err := openFileSystem(o.dir)
	if err != nil {
		return err
	}
	o.fs = fs
	part := path.Join(dir, fmt.Sprintf("part-%d", ctx.SubtaskIndex))
	bg := context.Background()
	if err := fs.MkdirAll(bg, dir); err != nil {
		return err
	}
	if err := fs.RemoveAll(bg, part); err != nil {
		return err
	}
	if o.f, err = fs.Create(bg, part); err != nil {
		return err
	}
	o.w = bufio.NewWriterSize(o.f, 64<<10)
	return nil
}

func (o *textSinkOp) ProcessElement(_ int, r runtime.Record) error {
	if s, ok := r.Value.(string); ok {
		return writeLine(o.w, s)
	}
	_, err := fmt.Fprintln(o.w, r.Value)
	return err
}

func (o *textSinkOp) ProcessWatermark(int64) error { return nil }

// Finish makes the part file durable: closing it is what commits it.
func (o *textSinkOp) Finish() error {
	if err := o.w.Flush(); err != nil {
		return err
	}
	f := o.f
	o.f = nil
	return f.Close()
}

func (o *textSinkOp) Close() error {
	var err error
	if o.f != nil { // failed or cancelled: abandon the part file
		err = o.f.Close()
		o.f = nil
	}
	if o.fs != nil {
		err = errors.Join(err, o.fs.Close())
		o.fs = nil
	}
	return err
}
