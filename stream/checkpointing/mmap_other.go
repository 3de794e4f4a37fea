//go:build !unix

package checkpointing

import (
	"os"

	"github.com/gofl/gofl/stream/runtime"
)

// mapping is unused where there is no mmap: files are read.
type mapping struct{ data []byte }

func mapFile(*os.File) *mapping                    { return nil }
func (m *mapping) retain(*runtime.OperatorRestore) {}
func (m *mapping) release()                        {}
