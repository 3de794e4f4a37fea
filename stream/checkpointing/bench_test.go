package checkpointing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
	"github.com/gofl/gofl/stream/runtime"
)

// BenchmarkCheckpointSnapshotRestore takes a checkpoint of one subtask's
// keyed state (1 KiB values; GOFL_BENCH_STATE_MB MiB in all, default
// 1024) to file:// through the real path (the backend's synchronous
// snapshot, the Responder's asynchronous write, the acknowledgement) and
// restores it (read and check, key-group filter, hand to a new backend,
// which decodes each key group on first access; decoding them all is
// reported apart as decode-all-s), and
// reports both against dd writing (conv=fsync) and reading the same number
// of bytes in the same directory, in the same run.
func BenchmarkCheckpointSnapshotRestore(b *testing.B) {
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_STATE_MB")); err == nil && v > 0 {
		mb = v
	}
	const valueSize, maxPar = 1024, 128
	keys := mb << 20 / valueSize
	src := runtime.NewKeyedStateBackend(maxPar)
	src.SetKeyCodec(int64Codec{})
	if err := src.RegisterState("v", bytesCodec{}); err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < keys; k++ {
		v := make([]byte, valueSize)
		for i := 0; i < valueSize; i += 8 {
			binary.LittleEndian.PutUint64(v[i:], rnd.Uint64())
		}
		src.SetCurrentKey(int64(k))
		src.Put("v", v)
	}
	dir := b.TempDir()
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		loc := "file://" + filepath.Join(dir, fmt.Sprintf("chk-%d", i+1))
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("chk-%d", i+1)), 0o755); err != nil {
			b.Fatal(err)
		}
		// Checkpoint: synchronous snapshot, then the asynchronous write,
		// until the acknowledgement.
		reports := make(chan *pb.RunnerCheckpointReport, 1)
		r := NewResponder(ResponderConfig{JobID: "bench", Attempt: &pb.ExecutionAttemptID{JobVertexId: "v"}, Parallelism: 1, MaxParallelism: maxPar,
			FileSystems: fss, Report: func(x *pb.RunnerCheckpointReport) { reports <- x }, Log: zerolog.Nop()})
		start := time.Now()
		snap := &runtime.OperatorSnapshot{OperatorID: "op"}
		if err := src.SnapshotAsync(snap); err != nil {
			b.Fatal(err)
		}
		sync := time.Since(start)
		r.Acknowledge(runtime.CheckpointBarrier{ID: int64(i + 1), Options: runtime.CheckpointOptions{TargetLocation: loc}},
			&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{snap}}, runtime.CheckpointSyncMetrics{SyncDuration: sync})
		rep := <-reports
		checkpoint := time.Since(start)
		r.Close()
		ack := rep.GetAcknowledge()
		if ack == nil {
			b.Fatalf("checkpoint declined: %v", rep.GetDecline().GetReason())
		}
		snap = nil

		// Restore into a new backend.
		start = time.Now()
		tr, err := Restore(context.Background(), fss, &pb.TaskRestore{CheckpointId: int64(i + 1), Location: loc, Operators: ack.Operators}, 0, 1, maxPar)
		if err != nil {
			b.Fatal(err)
		}
		read := time.Since(start)
		dst := runtime.NewKeyedStateBackend(maxPar)
		dst.SetKeyCodec(int64Codec{})
		if err := dst.Restore(tr.Operators["op"]); err != nil {
			b.Fatal(err)
		}
		if err := dst.RegisterState("v", bytesCodec{}); err != nil {
			b.Fatal(err)
		}
		restore := time.Since(start)
		dst.SetCurrentKey(int64(keys - 1))
		if _, ok := dst.Get("v"); !ok {
			b.Fatal("the last key was not restored")
		}
		// Key groups decode on first access: decoding all of them is the
		// work a task does over its first records, reported apart.
		start = time.Now()
		if n := len(dst.Keys("v")); n != keys {
			b.Fatalf("%d keys restored, want %d", n, keys)
		}
		decodeAll := time.Since(start)

		size := ack.Metrics.GetStateSize()
		ddWrite, ddRead := ddTimes(b, filepath.Join(dir, "dd"), size)
		b.ReportMetric(checkpoint.Seconds(), "checkpoint-s")
		b.ReportMetric(sync.Seconds(), "sync-s")
		b.ReportMetric(restore.Seconds(), "restore-s")
		b.ReportMetric(read.Seconds(), "restore-read-s")
		b.ReportMetric(decodeAll.Seconds(), "decode-all-s")
		b.ReportMetric(ddWrite.Seconds(), "dd-write-s")
		b.ReportMetric(ddRead.Seconds(), "dd-read-s")
		b.ReportMetric(checkpoint.Seconds()/ddWrite.Seconds(), "checkpoint/dd")
		b.ReportMetric(restore.Seconds()/ddRead.Seconds(), "restore/dd")
		b.ReportMetric(float64(size)/(1<<20)/checkpoint.Seconds(), "checkpoint-MB/s")
		b.ReportMetric(float64(size)/(1<<20)/restore.Seconds(), "restore-MB/s")
		if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("chk-%d", i+1))); err != nil {
			b.Fatal(err)
		}
	}
}

// ddTimes times dd writing size bytes to path with fsync, and reading
// them back.
func ddTimes(b *testing.B, path string, size int64) (write, read time.Duration) {
	b.Helper()
	const bs = 4 << 20
	count := strconv.FormatInt((size+bs-1)/bs, 10)
	start := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=4M", "count="+count, "conv=fsync", "status=none").CombinedOutput(); err != nil {
		b.Fatalf("dd write: %v: %s", err, out)
	}
	write = time.Since(start)
	start = time.Now()
	if out, err := exec.Command("dd", "if="+path, "of=/dev/null", "bs=4M", "status=none").CombinedOutput(); err != nil {
		b.Fatalf("dd read: %v: %s", err, out)
	}
	read = time.Since(start)
	_ = os.Remove(path)
	return write, read
}

type int64Codec struct{}

func (int64Codec) Append(dst []byte, v any) ([]byte, error) {
	return binary.AppendVarint(dst, v.(int64)), nil
}

func (int64Codec) Decode(src []byte) (any, error) {
	v, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return nil, errors.New("bad int64")
	}
	return v, nil
}

func (int64Codec) TypeName() string { return "int64" }

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v any) ([]byte, error) { return append(dst, v.([]byte)...), nil }
func (bytesCodec) Decode(src []byte) (any, error)           { return append([]byte(nil), src...), nil }
func (bytesCodec) TypeName() string                         { return "[]byte" }

// BenchmarkCheckpointLocalRecovery writes one subtask's keyed state
// (GOFL_BENCH_STATE_MB MiB, default 1024) to hdfs:// checkpoint storage
// with a task-local copy, then restores it from the local copy and from
// hdfs://, and reports both times and their ratio.
func BenchmarkCheckpointLocalRecovery(b *testing.B) {
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_STATE_MB")); err == nil && v > 0 {
		mb = v
	}
	const maxPar = 128
	hdfs := storagetest.HDFS(b)
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	store := NewTaskLocalStateStore(b.TempDir(), "v1", 0, zerolog.Nop())
	op := &runtime.OperatorSnapshot{OperatorID: "op"}
	per := mb << 20 / maxPar
	rnd := rand.New(rand.NewPCG(3, 4))
	for g := range maxPar {
		v := make([]byte, per)
		for i := 0; i+8 <= per; i += 8 {
			binary.LittleEndian.PutUint64(v[i:], rnd.Uint64())
		}
		op.PutKeyed(g, "state:big", "bytes", v)
	}
	loc := fmt.Sprintf("%s/gofl-bench/local-recovery-%d/chk-1", hdfs, time.Now().UnixNano())
	reports := make(chan *pb.RunnerCheckpointReport, 1)
	r := NewResponder(ResponderConfig{JobID: "bench", Attempt: &pb.ExecutionAttemptID{JobVertexId: "v"}, Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: func(x *pb.RunnerCheckpointReport) { reports <- x }, LocalState: store, Log: zerolog.Nop()})
	r.Acknowledge(runtime.CheckpointBarrier{ID: 1, Options: runtime.CheckpointOptions{TargetLocation: loc}},
		&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}, runtime.CheckpointSyncMetrics{})
	rep := <-reports
	r.Close()
	ack := rep.GetAcknowledge()
	if ack == nil {
		b.Fatalf("checkpoint declined: %v", rep.GetDecline().GetReason())
	}
	op = nil
	tr := &pb.TaskRestore{CheckpointId: 1, Location: loc, Operators: ack.Operators}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		times := map[string]time.Duration{}
		for _, tc := range []struct {
			name  string
			store *TaskLocalStateStore
		}{{"local", store}, {"hdfs", nil}} {
			start := time.Now()
			got, st, err := tc.store.Restore(context.Background(), fss, tr, 0, 1, maxPar)
			if err != nil {
				b.Fatal(err)
			}
			times[tc.name] = time.Since(start)
			if tc.store != nil && st.LocalFiles == 0 {
				b.Fatalf("the local copy was not used: %+v", st)
			}
			if len(got.Operators["op"].Keyed) != maxPar {
				b.Fatalf("restored %d key groups", len(got.Operators["op"].Keyed))
			}
		}
		b.ReportMetric(times["local"].Seconds(), "local-restore-s")
		b.ReportMetric(times["hdfs"].Seconds(), "hdfs-restore-s")
		b.ReportMetric(times["hdfs"].Seconds()/times["local"].Seconds(), "hdfs/local")
	}
}
