package runtime

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// BlockingResult is a local BLOCKING result: producers serialize their
// events with the exchange's codec into pages of managed memory and spill
// them to a file per subpartition when the producer's slot has no page
// left; consumers see nothing until every producer finished, as with
// Flink's blocking partitions. Serve reads the file, then the pages, and
// releases both as it goes.
type BlockingResult struct {
	mu        sync.Mutex
	codec     Codec
	mem       []*MemoryManager // per producer
	io        *IOManager
	subs      [][]*blockingSub // [producer][subpartition]
	remaining int
	done      chan struct{}
}

type blockingSub struct {
	pages [][]byte
	held  int64
	file  *os.File
	w     *bufio.Writer
}

// NewBlockingResult returns a result of producers × subpartitions whose
// records are serialized with c; producer p reserves from mem[p] and all
// spill through io.
func NewBlockingResult(producers, subpartitions int, c Codec, mem []*MemoryManager, io *IOManager) *BlockingResult {
	r := &BlockingResult{codec: c, mem: mem, io: io, subs: make([][]*blockingSub, producers), remaining: producers, done: make(chan struct{})}
	for p := range r.subs {
		r.subs[p] = make([]*blockingSub, subpartitions)
		for s := range r.subs[p] {
			r.subs[p][s] = &blockingSub{}
		}
	}
	return r
}

// Writer is the ResultWriter of one producer subtask.
func (r *BlockingResult) Writer(producer int) ResultWriter {
	return &blockingWriter{r: r, p: producer}
}

// Event encoding in a blocking result: kind byte; a record: flags (1 =
// timestamp), the zig-zag timestamp if any, the uvarint length and the
// codec's bytes; a watermark: its zig-zag varint.
func (w *blockingWriter) encode(dst []byte, ev Event) ([]byte, error) {
	dst = append(dst, byte(ev.Kind))
	switch ev.Kind {
	case EventRecord:
		if ev.Record.HasTimestamp {
			dst = append(dst, 1)
			dst = binary.AppendVarint(dst, ev.Record.Timestamp)
		} else {
			dst = append(dst, 0)
		}
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0) // fixed u32 length, set below
		var err error
		if dst, err = w.r.codec.Append(dst, ev.Record.Value); err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	case EventWatermark:
		dst = binary.AppendVarint(dst, ev.Watermark)
	default:
		return nil, fmt.Errorf("runtime: a %d event on a local blocking exchange", ev.Kind)
	}
	return dst, nil
}

type blockingWriter struct {
	r   *BlockingResult
	p   int
	buf []byte
}

func (w *blockingWriter) NumSubpartitions() int { return len(w.r.subs[w.p]) }

func (w *blockingWriter) mem() *MemoryManager {
	if w.p < len(w.r.mem) {
		return w.r.mem[w.p]
	}
	return nil
}

func (w *blockingWriter) Emit(s int, ev Event) error {
	b, err := w.encode(w.buf[:0], ev)
	if err != nil {
		return err
	}
	w.buf = b
	sub := w.r.subs[w.p][s]
	if n := len(sub.pages); n > 0 && len(sub.pages[n-1])+len(b) <= cap(sub.pages[n-1]) {
		sub.pages[n-1] = append(sub.pages[n-1], b...)
		return nil
	}
	size := max(PageSize, len(b))
	if m := w.mem(); m != nil {
		if !m.TryReserve(int64(size)) {
			if err := w.spill(); err != nil {
				return err
			}
			if !m.TryReserve(int64(size)) {
				m.used.Add(int64(size)) // overdraft: one page in memory
			}
		}
		sub.held += int64(size)
	}
	var pg []byte
	if m := w.mem(); m != nil && size == PageSize {
		pg = m.AllocatePage()
	} else {
		pg = make([]byte, 0, size)
	}
	sub.pages = append(sub.pages, append(pg, b...))
	return nil
}

// spill appends the producer's pages to their subpartitions' files.
func (w *blockingWriter) spill() error {
	for _, sub := range w.r.subs[w.p] {
		if len(sub.pages) == 0 {
			continue
		}
		if sub.file == nil {
			f, err := w.r.io.CreateSpillFile("blocking")
			if err != nil {
				return err
			}
			sub.file, sub.w = f, bufio.NewWriterSize(f, 32<<10)
		}
		for _, pg := range sub.pages {
			if _, err := sub.w.Write(pg); err != nil {
				return fmt.Errorf("runtime: spilling a blocking result: %w", err)
			}
			w.r.io.AddSpilled(int64(len(pg)))
			if m := w.mem(); m != nil {
				m.FreePage(pg)
			}
		}
		sub.pages = nil
		w.release(sub)
	}
	return nil
}

func (w *blockingWriter) release(sub *blockingSub) {
	if m := w.mem(); m != nil && sub.held > 0 {
		m.Release(sub.held)
	}
	sub.held = 0
}

func (w *blockingWriter) Flush() error { return nil }

func (w *blockingWriter) Finish() error {
	for _, sub := range w.r.subs[w.p] {
		if sub.w != nil {
			if err := sub.w.Flush(); err != nil {
				return fmt.Errorf("runtime: spilling a blocking result: %w", err)
			}
		}
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	w.r.remaining--
	if w.r.remaining == 0 {
		close(w.r.done)
	}
	return nil
}

// Serve feeds subpartition sub to gate once all producers finished, the
// producer p's events on channel base+p, then returns. It returns early
// with ctx's error. What it handed on is released.
func (r *BlockingResult) Serve(ctx context.Context, sub int, gate *LocalGate, base, batchSize int) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for p := range r.subs {
		r.mu.Lock()
		s := r.subs[p][sub]
		r.subs[p][sub] = &blockingSub{}
		r.mu.Unlock()
		if err := r.serveOne(ctx, p, s, gate, base+p, batchSize); err != nil {
			return err
		}
	}
	return nil
}

func (r *BlockingResult) serveOne(ctx context.Context, p int, s *blockingSub, gate *LocalGate, ch, batchSize int) (err error) {
	w := &blockingWriter{r: r, p: p}
	defer func() {
		w.release(s)
		if s.file != nil {
			err = errors.Join(err, r.io.RemoveSpillFile(s.file))
		}
	}()
	batch := make([]Event, 0, batchSize)
	emit := func(ev Event) error {
		batch = append(batch, ev)
		if len(batch) == batchSize || ev.Kind == EventEndOfPartition {
			if err := gate.send(ctx, ChannelBatch{Channel: ch, Events: batch}); err != nil {
				return err
			}
			batch = make([]Event, 0, batchSize)
		}
		return nil
	}
	if s.file != nil {
		if _, err := s.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("runtime: reading a blocking result: %w", err)
		}
		if err := r.decode(bufio.NewReaderSize(s.file, 32<<10), emit); err != nil {
			return err
		}
	}
	for i, pg := range s.pages {
		s.pages[i] = nil
		size := int64(cap(pg))
		rest := pg
		if err := r.decode(byteReader{&rest}, emit); err != nil {
			return err
		}
		if m := w.mem(); m != nil {
			m.FreePage(pg)
			if s.held >= size {
				m.Release(size)
				s.held -= size
			}
		}
	}
	return emit(Event{Kind: EventEndOfPartition})
}

// byteReader reads a page in place.
type byteReader struct{ b *[]byte }

func (br byteReader) ReadByte() (byte, error) {
	if len(*br.b) == 0 {
		return 0, io.EOF
	}
	c := (*br.b)[0]
	*br.b = (*br.b)[1:]
	return c, nil
}

func (br byteReader) Read(p []byte) (int, error) {
	if len(*br.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, *br.b)
	*br.b = (*br.b)[n:]
	return n, nil
}

func (r *BlockingResult) decode(src io.ByteReader, emit func(Event) error) error {
	rd := src.(io.Reader)
	var buf []byte
	for {
		k, err := src.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("runtime: reading a blocking result: %w", err)
		}
		ev := Event{Kind: EventKind(k)}
		switch ev.Kind {
		case EventRecord:
			flags, err := src.ReadByte()
			if err != nil {
				return fmt.Errorf("runtime: reading a blocking result: %w", err)
			}
			if flags&1 != 0 {
				if ev.Record.Timestamp, err = binary.ReadVarint(src); err != nil {
					return fmt.Errorf("runtime: reading a blocking result: %w", err)
				}
				ev.Record.HasTimestamp = true
			}
			var l [4]byte
			if _, err := io.ReadFull(rd, l[:]); err != nil {
				return fmt.Errorf("runtime: reading a blocking result: %w", err)
			}
			buf = grow(buf, int(binary.LittleEndian.Uint32(l[:])))
			if _, err := io.ReadFull(rd, buf); err != nil {
				return fmt.Errorf("runtime: reading a blocking result: %w", err)
			}
			if ev.Record.Value, err = r.codec.Decode(buf); err != nil {
				return fmt.Errorf("runtime: decoding a blocking result: %w", err)
			}
		case EventWatermark:
			if ev.Watermark, err = binary.ReadVarint(src); err != nil {
				return fmt.Errorf("runtime: reading a blocking result: %w", err)
			}
		default:
			return fmt.Errorf("runtime: corrupt blocking result (event kind %d)", k)
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
}
