package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

// supervisorDir is the supervisor's working directory's name in the
// cluster directory; SupervisorRole is its gofl command.
const (
	supervisorDir = "supervisor"
	// SupervisorRole is the hidden gofl command that runs Supervise.
	SupervisorRole = "local-supervisor"
	// launchFile holds, in the JobManager's directory, what a restart
	// starts again and whose HA data a failed cluster's cleanup removes:
	// binary and configuration (0600: it may hold secrets).
	launchFile = "launch.json"
)

// launch is what the supervisor needs to start the JobManager again.
type launch struct {
	Binary   string            `json:"binary"`
	Config   map[string]string `json:"config"`
	Attempts int               `json:"attempts"`
}

// superviseInterval is how often the supervisor looks at the JobManager.
const superviseInterval = 100 * time.Millisecond

// Supervise restarts the JobManager of the cluster clusterID in base (the
// provider's directory) when it ends abnormally, until it has been started
// launch.Attempts times, as YARN restarts an ApplicationMaster up to
// yarn.application-attempts. It runs in its own process (`gofl
// local-supervisor`, started by Deploy when attempts exceed 1) and
// returns when the cluster ended: the JobManager exited by itself (its
// work is over or it was stopped), the cluster was killed (its record is
// gone), it ran out of attempts (the record notes the failure), or ctx
// ended. Before it returns, it stops what is left of the cluster but
// itself, unless ctx ended (Kill stops everything then). A restart binds
// the same RPC and REST ports, so clients and TaskManagers find the new
// JobManager where the old one was; under high availability it recovers
// the cluster's jobs from the HA stores.
func Supervise(ctx context.Context, base, clusterID string, log zerolog.Logger) error {
	d := NewDeployer(Options{Dir: base, Log: log})
	dir, err := d.clusterDir(clusterID)
	if err != nil {
		return err
	}
	jmDir := filepath.Join(dir, jobManagerDir)
	var l launch
	b, err := os.ReadFile(filepath.Join(jmDir, launchFile))
	if err != nil {
		return fmt.Errorf("local: supervisor: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("local: supervisor: %s: %w", launchFile, err)
	}
	log = log.With().Str("cluster_id", clusterID).Logger()
	tick := time.NewTicker(superviseInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rec, err := d.readRecord(dir)
		if errors.Is(err, fs.ErrNotExist) {
			log.Info().Msg("the cluster's record is gone; supervisor ends")
			return nil
		}
		if err == nil && refreshAddresses(dir, &rec) {
			if err := d.writeRecord(dir, rec); err != nil {
				log.Error().Err(err).Msg("recording the restarted JobManager's addresses")
			}
		}
		if err != nil || rec.Status != providers.StatusRunning && rec.Status != providers.StatusStarting || rec.JobManager.alive() {
			continue
		}
		if rec.Status == providers.StatusStarting {
			continue // Deploy sees a first start fail and cleans up
		}
		if _, err := os.Stat(filepath.Join(jmDir, exitFile)); err == nil {
			log.Info().Msg("the JobManager ended by itself; stopping what is left of the cluster")
			d.stopClusterExcept(dir, supervisorDir, time.Time{})
			return nil
		}
		if rec.Attempts >= l.Attempts {
			rec.Failure = fmt.Sprintf("the JobManager ended abnormally (killed or crashed) on its attempt %d of %d (%s); the cluster is failed and its processes stopped",
				rec.Attempts, l.Attempts, conf.LocalJobManagerAttempts.Key())
			log.Warn().Int("attempts", rec.Attempts).Msg(rec.Failure)
			if err := d.writeRecord(dir, rec); err != nil {
				log.Error().Err(err).Msg("noting the failure")
			}
			d.stopClusterExcept(dir, supervisorDir, time.Time{})
			cleanupHAData(dir, log)
			return nil
		}
		if err := d.restart(dir, &rec, l, log); err != nil {
			rec.Failure = fmt.Sprintf("restarting the JobManager (attempt %d of %d): %v", rec.Attempts+1, l.Attempts, err)
			log.Error().Err(err).Msg("restarting the JobManager")
			_ = d.writeRecord(dir, rec)
			d.stopClusterExcept(dir, supervisorDir, time.Time{})
			return nil
		}
	}
}

// portsFreeWait bounds how long a restart waits for the dead JobManager's
// ports to be free before it takes new ones.
const portsFreeWait = 5 * time.Second

// restart starts the JobManager again on its previous ports and records
// the attempt. The ports were the kernel's pick from the ephemeral range:
// once their JobManager died, another process's connection may hold one
// as its local port. The restart waits a little for them, and then takes
// new ports rather than start a JobManager that cannot bind (and spend an
// attempt on it): clients and TaskManagers of a highly available cluster
// find the new leader through the HA services, and the record gets the
// new addresses when the JobManager logs them (refreshAddresses).
func (d *Deployer) restart(dir string, rec *record, l launch, log zerolog.Logger) error {
	cfg := make(map[string]string, len(l.Config)+2)
	for k, v := range l.Config {
		cfg[k] = v
	}
	jmDir := filepath.Join(dir, jobManagerDir)
	samePorts := waitBindable(portsFreeWait, rec.RESTAddress, rec.RPCAddress)
	if samePorts {
		if _, port, err := net.SplitHostPort(rec.RESTAddress); err == nil {
			cfg[conf.RestPort.Key()] = port
		}
		if _, port, err := net.SplitHostPort(rec.RPCAddress); err == nil {
			cfg[conf.JobManagerRPCPort.Key()] = port
		}
	} else {
		log.Warn().Str("rpc", rec.RPCAddress).Str("rest", rec.RESTAddress).Dur("waited", portsFreeWait).
			Msg("the dead JobManager's ports are taken; restarting it on new ones")
	}
	var logOffset int64 // where the new JobManager's lines begin
	if st, err := os.Stat(filepath.Join(jmDir, logFile)); err == nil {
		logOffset = st.Size()
	}
	p, err := startProcess(l.Binary, "jobmanager", jmDir, rec.ClusterID, cfg)
	if err != nil {
		return err
	}
	rec.JobManager = p.id
	rec.Attempts++
	rec.Restarted = time.Now().UTC().Truncate(time.Millisecond)
	if !samePorts {
		rec.RPCAddress, rec.RESTAddress, rec.AddressesFrom = "", "", logOffset
	}
	log.Warn().Int("pid", p.id.PID).Int("attempt", rec.Attempts).Int("attempts", l.Attempts).Bool("same_ports", samePorts).
		Msg("the JobManager ended abnormally; restarted it")
	return d.writeRecord(dir, *rec)
}

// refreshAddresses fills in the addresses of a JobManager restarted on new
// ports once it logged them (after rec.AddressesFrom in its log); it
// reports whether the record changed. Only a restart leaves the record
// without addresses: a first start's are Deploy's to write.
func refreshAddresses(dir string, rec *record) bool {
	if rec.RESTAddress != "" || rec.Attempts < 2 {
		return false
	}
	b := readFile(filepath.Join(dir, jobManagerDir, logFile))
	if rec.AddressesFrom > int64(len(b)) {
		return false
	}
	m := addrLine.FindSubmatch(b[rec.AddressesFrom:])
	if m == nil {
		return false
	}
	rec.RPCAddress, rec.RESTAddress, rec.AddressesFrom = string(m[1]), string(m[2]), 0
	return true
}

// waitBindable waits up to limit until every address can be listened on
// (an empty one counts as free), and reports whether they could.
func waitBindable(limit time.Duration, addrs ...string) bool {
	deadline := time.Now().Add(limit)
	for {
		free := true
		for _, a := range addrs {
			if a == "" {
				continue
			}
			lis, err := net.Listen("tcp", a)
			if err != nil {
				free = false
				break
			}
			lis.Close()
		}
		if free || time.Now().After(deadline) {
			return free
		}
		time.Sleep(100 * time.Millisecond)
	}
}
