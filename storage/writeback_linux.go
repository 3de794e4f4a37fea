package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the range to disk now,
// without waiting for it (RocksDB's bytes_per_sync): the final fsync then
// finds little left to write, and the disk works while the writer goes on
// producing. Best effort: an error only loses the head start.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
