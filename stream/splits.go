package stream

import (
	"fmt"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// indexSplit is an arithmetic sequence of record indexes a source emits:
// Next, Next+Stride, ... up to End (exclusive; -1: for ever). It is one
// element of the source's SPLIT list state, so after a restore at another
// parallelism the sequences are dealt out again and each resumes exactly
// at its next index.
type indexSplit struct {
	Next, End, Stride int64
}

var indexSplitCodec = codec.MustFor[indexSplit]()

const indexSplitType = "IndexSplit"

// indexSplits reads several sequences round robin, one batch at a time, so
// none starves when unbounded ones were merged on a scale-down.
type indexSplits struct {
	name   string
	splits []indexSplit
	cur    int
}

// open starts from the restored sequences, or from initial on a fresh
// start.
func (s *indexSplits) open(ctx *runtime.Context, name string, initial indexSplit) error {
	s.name = name
	if ctx.Restore == nil {
		if initial.End < 0 || initial.Next < initial.End {
			s.splits = []indexSplit{initial}
		}
		return nil
	}
	if err := ctx.Restore.CheckType(name, indexSplitType); err != nil {
		return err
	}
	for _, b := range ctx.Restore.Lists[name] {
		sp, n, err := indexSplitCodec.Decode(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("source %q: restoring %s: %w", ctx.OperatorName, name, err)
		}
		s.splits = append(s.splits, sp)
	}
	return nil
}

// emit emits up to budget indexes and reports whether every sequence
// ended.
func (s *indexSplits) emit(budget int, fn func(i int64)) bool {
	for budget > 0 && len(s.splits) > 0 {
		if s.cur >= len(s.splits) {
			s.cur = 0
		}
		sp := &s.splits[s.cur]
		for ; budget > 0 && (sp.End < 0 || sp.Next < sp.End); budget-- {
			fn(sp.Next)
			sp.Next += sp.Stride
		}
		if sp.End >= 0 && sp.Next >= sp.End {
			s.splits = append(s.splits[:s.cur], s.splits[s.cur+1:]...)
		} else {
			s.cur++
		}
	}
	return len(s.splits) == 0
}

func (s *indexSplits) snapshot(snap *runtime.OperatorSnapshot) error {
	els := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		els[i] = indexSplitCodec.Append(nil, sp)
	}
	snap.PutList(s.name, runtime.SplitList, indexSplitType, els)
	return nil
}
