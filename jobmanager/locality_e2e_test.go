package jobmanager_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
	"github.com/gofl/gofl/stream"
)

// TestFileSourceReadsLocallyOnMultiHostHDFS runs paced-lines
// (TextFileSource) over a file of 24 one-MiB blocks on a MiniDFSCluster
// whose DataNodes registered as 127.0.0.2, .3, .4, with one TaskManager
// bound to each of those addresses: the JobMaster's enumerator gets the
// blocks' hosts from the NameNode (WebHDFS) and hands each reader the
// blocks of its own host first, so at least 90% of the splits are read
// locally. Each block has two replicas (on two of the three hosts): with
// one replica, the NameNode's random placement may leave one host with far
// more blocks than the others, and the readers of the others then have to
// read remotely whatever the assigner does. Then, with one host's
// TaskManager gone, a second run still reads every line exactly once.
func TestFileSourceReadsLocallyOnMultiHostHDFS(t *testing.T) {
	h := storagetest.HDFSWithHosts(t)
	if len(h.DataNodes) < 3 {
		t.Fatalf("want 3 DataNode hosts, have %v", h.DataNodes)
	}
	// The enumerator (in this process) finds WebHDFS through the Hadoop
	// configuration; the TaskManager processes inherit it too.
	t.Setenv("HADOOP_CONF_DIR", h.HadoopConfDir(t))

	const blocks, block, lineLen = 24, 1 << 20, 256
	const n = blocks * block / lineLen
	var data bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&data, "%0*d\n", lineLen-1, i)
	}
	p := fmt.Sprintf("/locality-%d.txt", time.Now().UnixNano())
	h.Create(t, p, data.Bytes(), block, 2)
	in := h.NameNode + p
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if fsys, _, err := storage.Open(ctx, h.NameNode+"/", storage.Options{}); err == nil {
			_ = fsys.RemoveAll(ctx, p)
			fsys.Close()
		}
	})

	c := newCluster(t, faultRestart)
	for _, host := range h.DataNodes[:3] {
		c.startTaskManagerProcessWith("tm-"+host, 1, map[string]string{"taskmanager.host": host})
	}
	c.waitForTaskManagers(3)

	out := filepath.Join(t.TempDir(), "out")
	id := c.runSDKJob(testJobBinary, 3, "paced-lines", "--input", in, "--output", out, "--rate", "10000000")
	c.waitFor(id, 3*time.Minute, "FINISHED")
	c.logExceptions(id)
	checkNumbers(t, out, n)
	loc := stream.FileSourceLocality(in)
	t.Logf("splits with all TaskManagers: %+v", loc)
	if loc.None != 0 || loc.Local+loc.Remote < blocks {
		t.Fatalf("locality %+v: want %d or more splits, all with hosts", loc, blocks)
	}
	if loc.Local*10 < 9*(loc.Local+loc.Remote) {
		t.Errorf("%d of %d splits read locally, want at least 90%%", loc.Local, loc.Local+loc.Remote)
	}

	// One host's TaskManager gone: its blocks are read from the others.
	gone := h.DataNodes[2]
	c.kill9("tm-" + gone)
	c.waitForTaskManagers(2)
	out2 := filepath.Join(t.TempDir(), "out2")
	id = c.runSDKJob(testJobBinary, 2, "paced-lines", "--input", in, "--output", out2, "--rate", "10000000")
	c.waitFor(id, 3*time.Minute, "FINISHED")
	c.logExceptions(id)
	checkNumbers(t, out2, n)
	loc2 := stream.FileSourceLocality(in)
	t.Logf("splits without %s: %+v", gone, loc2)
	if read := loc2.Local + loc2.Remote - loc.Local - loc.Remote; read < blocks {
		t.Errorf("the second run assigned %d splits, want %d or more", read, blocks)
	}
}
