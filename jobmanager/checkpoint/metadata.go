package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
)

const (
	// MetadataVersion is the _metadata format this package writes and the
	// newest it reads.
	MetadataVersion = 1
	// MetadataFileName is the file a checkpoint or savepoint directory
	// holds last; without it the checkpoint does not exist.
	MetadataFileName = "_metadata"
)

// Errors of reading a _metadata file; they name the path.
var (
	ErrMetadataMissing = errors.New("checkpoint: no _metadata file")
	ErrMetadataCorrupt = errors.New("checkpoint: corrupt _metadata file")
	ErrMetadataVersion = errors.New("checkpoint: unsupported _metadata version")
)

// CheckpointLocation is checkpoint id's directory: <dir>/<job-id>/chk-<id>.
func CheckpointLocation(dir, jobID string, id int64) string {
	return strings.TrimRight(dir, "/") + "/" + jobID + "/chk-" + strconv.FormatInt(id, 10)
}

// SavepointLocation is a new savepoint's directory:
// <dir>/savepoint-<job-id[:6]>-<12 hex digits>.
func SavepointLocation(dir, jobID string, random uint64) string {
	prefix := jobID
	if len(prefix) > 6 {
		prefix = prefix[:6]
	}
	return fmt.Sprintf("%s/savepoint-%s-%012x", strings.TrimRight(dir, "/"), prefix, random&0xffffffffffff)
}

// MarshalMetadata encodes md (version set to MetadataVersion if unset).
func MarshalMetadata(md *pb.CheckpointMetadata) ([]byte, error) {
	if md.Version == 0 {
		md = proto.Clone(md).(*pb.CheckpointMetadata)
		md.Version = MetadataVersion
	}
	return proto.Marshal(md)
}

// UnmarshalMetadata decodes a _metadata file's bytes; name is for errors.
func UnmarshalMetadata(name string, data []byte) (*pb.CheckpointMetadata, error) {
	md := &pb.CheckpointMetadata{}
	if err := proto.Unmarshal(data, md); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrMetadataCorrupt, name, err)
	}
	if md.Version == 0 || md.CheckpointId <= 0 {
		return nil, fmt.Errorf("%w %s: no version or checkpoint id (%d bytes)", ErrMetadataCorrupt, name, len(data))
	}
	if md.Version > MetadataVersion {
		return nil, fmt.Errorf("%w %s: version %d, this gofl reads up to %d", ErrMetadataVersion, name, md.Version, MetadataVersion)
	}
	return md, nil
}

// WriteMetadata writes md as <dir>/_metadata in fsys (temporary name, then
// rename). Blocks; call it off the JobMaster's goroutine.
func WriteMetadata(ctx context.Context, fsys storage.FileSystem, dir string, md *pb.CheckpointMetadata) error {
	data, err := MarshalMetadata(md)
	if err != nil {
		return fmt.Errorf("checkpoint: encoding the metadata of %d: %w", md.GetCheckpointId(), err)
	}
	if _, err := storage.WriteFileAtomic(ctx, fsys, path.Join(dir, MetadataFileName), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", fsys.URI(path.Join(dir, MetadataFileName)), err)
	}
	return nil
}

// ReadMetadata reads <dir>/_metadata from fsys.
func ReadMetadata(ctx context.Context, fsys storage.FileSystem, dir string) (*pb.CheckpointMetadata, error) {
	p := path.Join(dir, MetadataFileName)
	data, err := storage.ReadFile(ctx, fsys, p)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w in %s: %w", ErrMetadataMissing, fsys.URI(dir), err)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading %s: %w", fsys.URI(p), err)
	}
	return UnmarshalMetadata(fsys.URI(p), data)
}

// Store does the coordinator's I/O on URIs (file://, hdfs://), opening the
// file system of each location. Its methods block and are safe for
// concurrent use; the JobMaster calls them from its I/O goroutine.
type Store struct {
	Options storage.Options
}

// Write writes md as <location>/_metadata.
func (s Store) Write(ctx context.Context, location string, md *pb.CheckpointMetadata) error {
	fsys, dir, err := storage.Open(ctx, location, s.Options)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", location, err)
	}
	defer fsys.Close()
	return WriteMetadata(ctx, fsys, dir, md)
}

// Read resolves a savepoint or retained checkpoint given as its directory
// or its _metadata file and reads the metadata. It returns the directory's
// URI, which relative state file paths resolve against.
func (s Store) Read(ctx context.Context, location string) (string, *pb.CheckpointMetadata, error) {
	location = strings.TrimRight(location, "/")
	if strings.HasSuffix(location, "/"+MetadataFileName) {
		location = strings.TrimSuffix(location, "/"+MetadataFileName)
	}
	fsys, dir, err := storage.Open(ctx, location, s.Options)
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: %s: %w", location, err)
	}
	defer fsys.Close()
	if fi, err := fsys.Stat(ctx, dir); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return "", nil, fmt.Errorf("%w: %s does not exist", ErrMetadataMissing, location)
		}
		return "", nil, fmt.Errorf("checkpoint: %s: %w", location, err)
	} else if !fi.IsDir {
		return "", nil, fmt.Errorf("%w: %s is a file, not a checkpoint directory", ErrMetadataMissing, location)
	}
	md, err := ReadMetadata(ctx, fsys, dir)
	if err != nil {
		return "", nil, err
	}
	return fsys.URI(dir), md, nil
}

// Discard deletes d: its files (relative to its location), or the whole
// directory. Idempotent.
func (s Store) Discard(ctx context.Context, d Discard) error {
	var errs []error
	if d.Location != "" {
		errs = append(errs, s.discardLocation(ctx, d))
	}
	for _, u := range d.SharedFiles {
		errs = append(errs, s.remove(ctx, u))
	}
	return errors.Join(errs...)
}

func (s Store) discardLocation(ctx context.Context, d Discard) error {
	fsys, dir, err := storage.Open(ctx, d.Location, s.Options)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", d.Location, err)
	}
	defer fsys.Close()
	if len(d.Files) == 0 {
		return fsys.RemoveAll(ctx, dir)
	}
	var errs []error
	for _, f := range d.Files {
		errs = append(errs, fsys.RemoveAll(ctx, path.Join(dir, path.Clean("/"+f))))
	}
	return errors.Join(errs...)
}

// remove deletes the file at uri (absent is fine).
func (s Store) remove(ctx context.Context, uri string) error {
	fsys, p, err := storage.Open(ctx, uri, s.Options)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", uri, err)
	}
	defer fsys.Close()
	if err := fsys.RemoveAll(ctx, p); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", uri, err)
	}
	return nil
}
