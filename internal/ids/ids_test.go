package ids

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	hex32 := "0123456789abcdef0123456789abcdef"
	key := BlobKeyPrefix + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name  string
		check func(string, string) error
		ok    []string
		bad   []string
	}{
		{"job id", JobID, []string{hex32}, []string{"", "../../../../tmp/x", strings.ToUpper(hex32), hex32 + "0", hex32[:31] + "g", "job"}},
		{"vertex id", VertexID, []string{"src", "op-1", "r[1]@a", "a.b_c", hex32},
			[]string{"", ".", "..", ".hidden", "a/b", `a\b`, "a b", "a\x00", strings.Repeat("x", MaxNameLen+1)}},
		{"blob key", BlobKey, []string{key}, []string{"", "sha256:", "sha256:../../x", strings.ToUpper(key), key + "0", "md5:" + hex32}},
		{"cluster id", ClusterID, []string{"session-0a1b2c", "c1", "My_Cluster.1"}, []string{"", ".x", "..", "a/b", "a b", "a@b", strings.Repeat("a", MaxNameLen+1)}},
		{"file name", FileName, []string{"runner.log", "a..b", "..x"}, []string{"", ".", "..", "a/b", `a\b`, "a\nb", strings.Repeat("f", 256)}},
	} {
		for _, s := range tc.ok {
			if err := tc.check("f", s); err != nil {
				t.Errorf("%s %q: %v, want ok", tc.name, s, err)
			}
		}
		for _, s := range tc.bad {
			err := tc.check("the field", s)
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Field != "the field" || e.Rule == "" {
				t.Errorf("%s %q: %v, want an *Error naming the field and the rule", tc.name, s, err)
			} else if !strings.Contains(err.Error(), "the field") || !strings.Contains(err.Error(), e.Rule) {
				t.Errorf("%s %q: message %q does not name the field and the rule", tc.name, s, err)
			}
		}
	}
}

func TestAttemptID(t *testing.T) {
	if err := AttemptID("a", "op", 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    string
		s, n int32
		want string
	}{{"a/b", 0, 0, "a.job_vertex_id"}, {"op", -1, 0, "a.subtask_index"}, {"op", 0, -1, "a.attempt_number"}} {
		var e *Error
		if err := AttemptID("a", c.v, c.s, c.n); !errors.As(err, &e) || e.Field != c.want {
			t.Errorf("AttemptID(%q, %d, %d) = %v, want an error on %s", c.v, c.s, c.n, err, c.want)
		}
	}
}

func TestJoinStaysInside(t *testing.T) {
	base := t.TempDir()
	p, err := Join(base, "jobs", "0123456789abcdef0123456789abcdef")
	if err != nil || p != filepath.Join(base, "jobs", "0123456789abcdef0123456789abcdef") {
		t.Fatalf("Join = %q, %v", p, err)
	}
	for _, elems := range [][]string{{"jobs", "../../../../tmp/x"}, {".."}, {"jobs", ".."}, {"a/../../b"}, {""}, {}} {
		if p, err := Join(base, elems...); !errors.Is(err, ErrEscapes) {
			t.Errorf("Join(%q) = %q, %v; want ErrEscapes", elems, p, err)
		}
	}
}
