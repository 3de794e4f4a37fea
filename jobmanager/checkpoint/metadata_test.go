package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
)

func sampleMetadata() *pb.CheckpointMetadata {
	return &pb.CheckpointMetadata{JobId: "job", CheckpointId: 7, Type: pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT,
		Operators: []*pb.OperatorState{{OperatorId: "op1", Parallelism: 2, MaxParallelism: 8, Subtasks: []*pb.OperatorSubtaskStateHandle{
			{OperatorId: "op1", SubtaskIndex: 0, File: &pb.StateFile{Path: "v-0-0-abc", Size: 3}},
		}}}}
}

func TestMetadataRoundtripAndRelocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "savepoint-job-000000000001")
	st := Store{}
	md := sampleMetadata()
	if err := st.Write(ctx, loc, md); err != nil {
		t.Fatal(err)
	}
	// Relocate the savepoint: the handles are relative, so it still reads.
	moved := filepath.Join(dir, "elsewhere")
	if err := os.Rename(strings.TrimPrefix(loc, "file://"), moved); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"file://" + moved, "file://" + moved + "/_metadata", moved + "/"} {
		gotLoc, got, err := st.Read(ctx, p)
		if err != nil {
			t.Fatalf("Read(%s): %v", p, err)
		}
		if gotLoc != "file://"+moved {
			t.Errorf("Read(%s) location = %s", p, gotLoc)
		}
		want := proto.Clone(md).(*pb.CheckpointMetadata)
		want.Version = MetadataVersion
		if !proto.Equal(got, want) {
			t.Errorf("Read(%s) = %v; want %v", p, got, want)
		}
	}
	entries, _ := os.ReadDir(moved)
	if len(entries) != 1 || entries[0].Name() != MetadataFileName {
		t.Errorf("directory holds %v; want only _metadata (no temporary file)", entries)
	}
	if err := st.Discard(ctx, Discard{Location: "file://" + moved}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(moved); !os.IsNotExist(err) {
		t.Errorf("discarded directory still there: %v", err)
	}
}

func TestMetadataErrorsNameThePath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := Store{}
	missing := "file://" + filepath.Join(dir, "nope")
	if _, _, err := st.Read(ctx, missing); !errors.Is(err, ErrMetadataMissing) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.Mkdir(empty, 0o755)
	if _, _, err := st.Read(ctx, "file://"+empty); !errors.Is(err, ErrMetadataMissing) || !strings.Contains(err.Error(), empty) {
		t.Errorf("no _metadata: %v", err)
	}
	corrupt := filepath.Join(dir, "corrupt")
	_ = os.Mkdir(corrupt, 0o755)
	_ = os.WriteFile(filepath.Join(corrupt, MetadataFileName), []byte("\xff\xff\xffgarbage"), 0o644)
	if _, _, err := st.Read(ctx, "file://"+corrupt); !errors.Is(err, ErrMetadataCorrupt) || !strings.Contains(err.Error(), corrupt) {
		t.Errorf("corrupt: %v", err)
	}
	newer := filepath.Join(dir, "newer")
	data, _ := proto.Marshal(&pb.CheckpointMetadata{Version: MetadataVersion + 1, CheckpointId: 1})
	_ = os.Mkdir(newer, 0o755)
	_ = os.WriteFile(filepath.Join(newer, MetadataFileName), data, 0o644)
	if _, _, err := st.Read(ctx, "file://"+newer); !errors.Is(err, ErrMetadataVersion) {
		t.Errorf("newer version: %v", err)
	}
}

func TestLocations(t *testing.T) {
	if got := CheckpointLocation("hdfs://nn:8020/ck/", "abc", 12); got != "hdfs://nn:8020/ck/abc/chk-12" {
		t.Errorf("CheckpointLocation = %s", got)
	}
	if got := SavepointLocation("file:///sp", "0123456789abcdef", 0xabc); got != "file:///sp/savepoint-012345-000000000abc" {
		t.Errorf("SavepointLocation = %s", got)
	}
}

func keyed(op string, sub, p int32, groups ...int32) *pb.OperatorSubtaskStateHandle {
	h := &pb.OperatorSubtaskStateHandle{OperatorId: op, SubtaskIndex: sub, Parallelism: p, MaxParallelism: 8, File: &pb.StateFile{Path: "f"}}
	for _, g := range groups {
		h.KeyGroups = append(h.KeyGroups, &pb.KeyGroupRegion{KeyGroup: g})
	}
	return h
}

func TestTaskRestoreForRescale(t *testing.T) {
	// Old parallelism 2 over 8 key groups: subtask 0 has 0-3, 1 has 4-7.
	// Old subtask 1 also holds list state, needed by everyone.
	old1 := keyed("op", 1, 2, 4, 5, 6, 7)
	old1.ListStates = []*pb.OperatorListStateHandle{{Name: "offsets", Mode: pb.OperatorStateMode_OPERATOR_STATE_MODE_SPLIT}}
	md := &pb.CheckpointMetadata{CheckpointId: 3, Operators: []*pb.OperatorState{
		{OperatorId: "op", Parallelism: 2, MaxParallelism: 8, Subtasks: []*pb.OperatorSubtaskStateHandle{keyed("op", 0, 2, 0, 1, 2, 3), old1}},
		{OperatorId: "other", Parallelism: 1, MaxParallelism: 8, Subtasks: []*pb.OperatorSubtaskStateHandle{keyed("other", 0, 1, 0)}},
	}}
	subs := func(tr *pb.TaskRestore) []int32 {
		var out []int32
		for _, h := range tr.GetOperators() {
			out = append(out, h.SubtaskIndex)
		}
		return out
	}
	// New parallelism 3: ranges 0-2, 3-5, 6-7.
	for i, want := range [][]int32{{0, 1}, {0, 1}, {1}} {
		tr := TaskRestoreFor(md, "file:///ck/chk-3", []string{"op"}, i, 3)
		if got := subs(tr); !equal(got, want) || tr.Location != "file:///ck/chk-3" || tr.CheckpointId != 3 {
			t.Errorf("subtask %d of 3: handles of old subtasks %v; want %v (%v)", i, got, want, tr)
		}
	}
	// Scale in to 1: everything.
	if got := subs(TaskRestoreFor(md, "l", []string{"op"}, 0, 1)); !equal(got, []int32{0, 1}) {
		t.Errorf("scale in: %v", got)
	}
	if tr := TaskRestoreFor(md, "l", []string{"new-op"}, 0, 1); tr != nil {
		t.Errorf("an operator without state restores %v", tr)
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidateRestore(t *testing.T) {
	jg := &jobgraph.JobGraph{Vertices: []*jobgraph.Vertex{{ID: "v", Operators: []jobgraph.Operator{{ID: "op1"}}}}}
	md := sampleMetadata()
	if err := ValidateRestore(md, "file:///sp/x", jg, false); err != nil {
		t.Errorf("all claimed: %v", err)
	}
	md.Operators = append(md.Operators, &pb.OperatorState{OperatorId: "gone1", Subtasks: []*pb.OperatorSubtaskStateHandle{keyed("gone1", 0, 1, 0)}},
		&pb.OperatorState{OperatorId: "stateless"}, &pb.OperatorState{OperatorId: "gone2", Subtasks: []*pb.OperatorSubtaskStateHandle{keyed("gone2", 0, 1)}})
	err := ValidateRestore(md, "file:///sp/x", jg, false)
	if !errors.Is(err, ErrUnknownOperators) || !strings.Contains(err.Error(), "gone1, gone2") || !strings.Contains(err.Error(), "file:///sp/x") ||
		strings.Contains(err.Error(), "stateless") || !strings.Contains(err.Error(), "ignore-unclaimed-state") {
		t.Errorf("err = %v", err)
	}
	if err := ValidateRestore(md, "file:///sp/x", jg, true); err != nil {
		t.Errorf("allowNonRestored: %v", err)
	}
}

// TestStoreDiscardSharedFiles: a Discard deletes the listed shared files
// by URI and, without a location, nothing else.
func TestStoreDiscardSharedFiles(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "job", "shared")
	chk := filepath.Join(root, "job", "chk-1")
	for _, p := range []string{filepath.Join(shared, "a"), filepath.Join(shared, "b"), filepath.Join(chk, "state")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uri := SharedLocation("file://"+root, "job")
	if uri != "file://"+shared {
		t.Fatalf("SharedLocation = %s", uri)
	}
	if err := (Store{}).Discard(context.Background(), Discard{SharedFiles: []string{uri + "/a", uri + "/gone"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, "a")); !os.IsNotExist(err) {
		t.Fatalf("shared file a not deleted: %v", err)
	}
	for _, p := range []string{filepath.Join(shared, "b"), filepath.Join(chk, "state")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s deleted: %v", p, err)
		}
	}
	if err := (Store{}).Discard(context.Background(), Discard{Location: "file://" + chk, SharedFiles: []string{uri + "/b"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{chk, filepath.Join(shared, "b")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s not deleted: %v", p, err)
		}
	}
}
