// Package ids holds the syntax of every identifier gofl accepts from the
// network: job, vertex, attempt and resource IDs, blob keys, cluster IDs
// and file names. Each check returns an error naming the field and the
// rule, wrapping ErrInvalid, so callers map it to 400 / InvalidArgument.
//
// Identifiers are checked where they arrive (REST paths and bodies, gRPC
// requests, TaskDeploymentDescriptors), before they are used as map keys,
// log fields or path elements. Path elements are then joined with Join,
// which refuses anything that leaves its base directory.
package ids

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrInvalid is wrapped by every error of this package.
var ErrInvalid = errors.New("ids: invalid identifier")

// Limits of the name syntax.
const (
	// MaxNameLen bounds names (vertex, resource, result and cluster IDs).
	MaxNameLen = 128
	// MaxFileNameLen is the usual file system limit of one path element.
	MaxFileNameLen = 255
	// JobIDLen is the length of a job ID: 16 bytes in hex, as Flink's JobID.
	JobIDLen = 32
	// BlobKeyPrefix starts every blob key; 64 hex digits of SHA-256 follow.
	BlobKeyPrefix = "sha256:"
)

// Rules, as the errors name them.
const (
	ruleJobID   = "want 32 lowercase hexadecimal characters"
	ruleName    = "want 1 to 128 characters of A-Z a-z 0-9 . _ - @ [ ], not starting with '.'"
	ruleBlobKey = "want sha256: and 64 lowercase hexadecimal characters"
	ruleCluster = "want 1 to 128 characters of A-Z a-z 0-9 . _ -, not starting with '.'"
	ruleFile    = "want one path element of 1 to 255 bytes: no '/', '\\', NUL or control characters, not '.' or '..'"
)

// Error is an identifier that breaks its rule.
type Error struct {
	Field string // what the identifier is, e.g. "job id", "SubmitTaskRequest.job_id"
	Value string // the offending value, shortened for messages
	Rule  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.Field, e.Value, e.Rule)
}

func (e *Error) Unwrap() error { return ErrInvalid }

func invalid(field, value, rule string) error {
	if len(value) > 80 {
		value = value[:80] + "..."
	}
	return &Error{Field: field, Value: value, Rule: rule}
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// JobID checks a job ID: 32 lowercase hex characters, Flink's JobID form.
func JobID(field, s string) error {
	if len(s) != JobIDLen || !isLowerHex(s) {
		return invalid(field, s, ruleJobID)
	}
	return nil
}

// Name checks a name used as an ID and possibly as part of a path element
// (vertex, result, resource, allocation IDs): 1..MaxNameLen characters of
// letters, digits and . _ - @ [ ], not starting with '.', so no name is
// "." or ".." or a hidden file.
func Name(field, s string) error {
	if s == "" || len(s) > MaxNameLen || s[0] == '.' {
		return invalid(field, s, ruleName)
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return invalid(field, s, ruleName)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("._-@[]", c) >= 0
}

const ruleResult = "want 1 to 128 printable ASCII characters without spaces, '/' or '\\', not starting with '.'"

// ResultID checks an intermediate data set ID: looser than a Name (graphs
// use "a>b"), but still never a path or a hidden file.
func ResultID(field, s string) error {
	if s == "" || len(s) > MaxNameLen || s[0] == '.' {
		return invalid(field, s, ruleResult)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' || c == '\\' {
			return invalid(field, s, ruleResult)
		}
	}
	return nil
}

// VertexID checks a job vertex ID (a Name).
func VertexID(field, s string) error { return Name(field, s) }

// AttemptID checks the parts of an execution attempt ID: its vertex ID and
// non-negative subtask index and attempt number.
func AttemptID(field, vertex string, subtask, attempt int32) error {
	if err := VertexID(field+".job_vertex_id", vertex); err != nil {
		return err
	}
	if subtask < 0 {
		return invalid(field+".subtask_index", fmt.Sprint(subtask), "want a non-negative number")
	}
	if attempt < 0 {
		return invalid(field+".attempt_number", fmt.Sprint(attempt), "want a non-negative number")
	}
	return nil
}

// BlobKey checks a content-addressed blob key: "sha256:" and 64 lowercase
// hex digits.
func BlobKey(field, s string) error {
	hex, ok := strings.CutPrefix(s, BlobKeyPrefix)
	if !ok || len(hex) != 64 || !isLowerHex(hex) {
		return invalid(field, s, ruleBlobKey)
	}
	return nil
}

// ClusterID checks a cluster ID: it names staging directories, Nomad jobs
// and processes. 1..128 letters, digits, '.', '_' and '-', not starting
// with '.'.
func ClusterID(field, s string) error {
	if Name(field, s) != nil || strings.ContainsAny(s, "@[]") {
		return invalid(field, s, ruleCluster)
	}
	return nil
}

// FileName checks one path element taken from the network.
func FileName(field, s string) error {
	if s == "" || len(s) > MaxFileNameLen || s == "." || s == ".." {
		return invalid(field, s, ruleFile)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '\\' || c < 0x20 || c == 0x7f {
			return invalid(field, s, ruleFile)
		}
	}
	return nil
}

// ErrEscapes is wrapped by Join's error for a path that leaves its base.
var ErrEscapes = errors.New("ids: path escapes its base directory")

// Join joins base and elems, each of which must be a FileName, and checks
// that the result stays strictly inside base. It is the TaskManager's one
// way to build paths from identifiers, so a bad ID cannot reach the file
// system even if a check upstream is missed.
func Join(base string, elems ...string) (string, error) {
	for _, e := range elems {
		if err := FileName("path element", e); err != nil {
			return "", fmt.Errorf("%w: %w", ErrEscapes, err)
		}
	}
	p := filepath.Join(append([]string{base}, elems...)...)
	rel, err := filepath.Rel(filepath.Clean(base), p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q under %q", ErrEscapes, p, base)
	}
	return p, nil
}
