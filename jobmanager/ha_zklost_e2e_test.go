package jobmanager_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/ha/zktest"
)

// TestHAZooKeeperLostWhileRunning cuts a single JobManager (and the
// TaskManagers it started) off ZooKeeper mid-job: the leader steps down
// (REST 503, the job's JobMaster stops, tasks are cancelled), and once
// ZooKeeper is back it leads again and recovers the job from its latest
// checkpoint; the committed output is exact.
func TestHAZooKeeperLostWhileRunning(t *testing.T) {
	parallel(t)
	h := newHACluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	px := zktest.NewProxy(t, strings.Split(zktest.Quorum(t), ",")[0])
	h.settings["high-availability.zookeeper.quorum"] = px.Addr()
	jm := h.startJobManager()
	h.leader(nil)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 20000, 8
	id := h.keyedCountsJob(2, count, keys, 1500, out)
	h.waitFor(id, 60*time.Second, "RUNNING")
	last := h.waitCheckpointAfter(id, 0, 60*time.Second)

	px.Pause()
	lost := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	h.eventually(60*time.Second, func() error {
		resp, err := hc.Get("http://" + jm.rest + "/overview")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("GET /overview: %d, want 503 once the leader stepped down", resp.StatusCode)
		}
		return nil
	})
	stepped := time.Since(lost)
	px.Resume()
	back := time.Now()
	cl, err := client.New(jm.rest)
	if err != nil {
		t.Fatal(err)
	}
	var restored int64
	h.eventually(90*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d, err := cl.JobDetails(ctx, id)
		if err != nil {
			return err
		}
		if d.State != "RUNNING" && d.State != "FINISHED" {
			return fmt.Errorf("job %s", d.State)
		}
		st, err := cl.JobCheckpoints(ctx, id)
		if err != nil {
			return err
		}
		if st.Latest.Restored == nil {
			return errors.New("not restored yet")
		}
		restored = st.Latest.Restored.ID
		return nil
	})
	if restored < last {
		t.Fatalf("the job restored checkpoint %d, want %d or later", restored, last)
	}
	t.Logf("ZooKeeper cut after checkpoint %d: the leader stepped down after %v; ZooKeeper back: job RUNNING again after %v from checkpoint %d",
		last, stepped.Round(time.Millisecond), time.Since(back).Round(time.Millisecond), restored)
	h.client = cl
	h.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}
