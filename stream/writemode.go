package stream

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gofl/gofl/storage"
)

// WriteMode says what a file sink does with an existing output path
// (Flink's FileSystem.WriteMode).
type WriteMode int

const (
	// NoOverwrite, the default, fails the job when it is submitted if the
	// output directory exists and is not empty.
	NoOverwrite WriteMode = iota
	// Overwrite removes the output directory when the job is submitted.
	Overwrite
)

func (m WriteMode) String() string {
	if m == Overwrite {
		return "OVERWRITE"
	}
	return "NO_OVERWRITE"
}

// kindTextSink is WriteAsText's node kind.
const kindTextSink = "sink-textfile"

// EnvSavepointPath is execution.savepoint.path as an environment variable:
// set (by `gofl run -s` and the JobManager), the job resumes from a
// savepoint and its file sinks continue in their existing directories.
const EnvSavepointPath = "GOFL_EXECUTION_SAVEPOINT_PATH"

// ErrOutputExists fails a job whose file sink's directory is not empty.
var ErrOutputExists = errors.New("stream: output directory exists and is not empty")

// prepareOutputs is Flink's FileOutputFormat.initializeGlobal: run once
// by the process that submits the job (never by its runners, which would
// see each other's part files), it checks, or with Overwrite removes, each
// file sink's directory.
func (p *Plan) prepareOutputs(ctx context.Context) error {
	if os.Getenv(EnvSavepointPath) != "" {
		return nil
	}
	for _, n := range p.env.nodes {
		if n.kind != kindTextSink {
			continue
		}
		dir, _ := n.params["path"].(string)
		overwrite := n.params["writeMode"] == Overwrite.String()
		if err := prepareOutputDir(ctx, dir, overwrite); err != nil {
			return fmt.Errorf("%s %s: %w", n.name, dir, err)
		}
	}
	return nil
}

func prepareOutputDir(ctx context.Context, dir string, overwrite bool) error {
	fs, root, err := openFileSystem(dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	ents, err := fs.ReadDir(ctx, root)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		if fi, serr := fs.Stat(ctx, root); serr == nil && !fi.IsDir {
			if overwrite {
				return fs.RemoveAll(ctx, root)
			}
			return fmt.Errorf("%w: it is a file; remove it or write with stream.Overwrite", ErrOutputExists)
		}
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	if overwrite {
		return fs.RemoveAll(ctx, root)
	}
	return fmt.Errorf("%w (%d entries, e.g. %s); remove it, choose another, or write with WriteAsText(dir, stream.Overwrite) (Flink's WriteMode.OVERWRITE)",
		ErrOutputExists, len(ents), ents[0].Name)
}
