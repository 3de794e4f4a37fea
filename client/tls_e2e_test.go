package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

type syncBuffer = clustertest.SyncBuffer

// waitFor polls cond; the deadline only bounds a hang on a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool, diag ...fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; output: %v", what, diag)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rogueTaskManager starts `gofl taskmanager` by hand against the
// JobManager at rpc with extra -D settings and returns its output; the
// process is killed at cleanup.
func rogueTaskManager(t *testing.T, gofl, rpc string, extra ...string) *syncBuffer {
	t.Helper()
	host, port, _ := strings.Cut(rpc, ":")
	args := []string{"taskmanager", "-D", "jobmanager.rpc.address=" + host, "-D", "jobmanager.rpc.port=" + port, "-D", "log.level=info"}
	for _, e := range extra {
		args = append(args, "-D", e)
	}
	cmd := exec.Command(gofl, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return out
}

// TestInternalTLSE2E: a cluster the local provider deploys runs with
// internal TLS by default on a generated per-cluster CA: wordcount runs
// end to end across two TaskManagers (gRPC, blob fetches and the data
// plane between their runners all on TLS); the staged certificates are
// private; a TaskManager without the cluster's certificate is refused and
// says why; anonymous gRPC calls fail with and without a foreign
// certificate; no key reaches a log.
func TestInternalTLSE2E(t *testing.T) {
	w := newWorld(t)
	gofl, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cc, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: "tls-session", TaskManagers: 2,
		Config: map[string]string{"taskmanager.numberOfTaskSlots": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.desc.KillCluster(context.Background(), "tls-session") })

	stagedDir := filepath.Join(w.home, ".gofl", "tls-session")
	for _, f := range []string{client.InternalCertFile, client.InternalKeyFile, client.InternalCAFile, "gofl.yaml"} {
		st, err := os.Stat(filepath.Join(stagedDir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("staged %s: %v %v, want 0600", f, st, err)
		}
	}
	key, err := os.ReadFile(filepath.Join(stagedDir, client.InternalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cluster := &tlsconf.Material{Key: key}
	cluster.Cert, _ = os.ReadFile(filepath.Join(stagedDir, client.InternalCertFile))
	cluster.CA, _ = os.ReadFile(filepath.Join(stagedDir, client.InternalCAFile))

	out := filepath.Join(w.home, "out")
	g, err := client.PlanJob(ctx, w.wc, []string{"--input", w.input, "--output", out}, client.PlanOptions{Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g.BinaryKey, _, err = cc.UploadBlob(ctx, w.wc); err != nil {
		t.Fatal(err)
	}
	id, err := cc.SubmitJob(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cc.WaitForJobResult(ctx, id)
	if err != nil || r.ApplicationStatus != "SUCCEEDED" {
		t.Fatalf("wordcount over internal TLS: %+v, %+v, %v", r, r.FailureCause, err)
	}
	w.checkCounts(t, out)

	rpc := cc.Info.RPCAddress
	// A TaskManager with internal TLS off, and one with another cluster's
	// certificate, are refused; both say why.
	plain := rogueTaskManager(t, gofl, rpc)
	foreignDir := t.TempDir()
	foreign, err := tlsconf.Generate("other", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fenv, err := foreign.WriteFiles(foreignDir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range fenv {
		k, v, _ := strings.Cut(e, "=")
		files[k] = v
	}
	other := rogueTaskManager(t, gofl, rpc, "security.ssl.internal.enabled=true",
		"security.ssl.internal.cert="+files[tlsconf.EnvCert], "security.ssl.internal.key="+files[tlsconf.EnvKey],
		"security.ssl.internal.ca="+files[tlsconf.EnvCA])
	waitFor(t, "the plain TaskManager's refusal", func() bool {
		return strings.Contains(plain.String(), "it may require internal TLS, which is off here (security.ssl.internal.enabled)")
	}, plain)
	waitFor(t, "the foreign TaskManager's refusal", func() bool {
		return strings.Contains(other.String(), "TLS handshake failure") && strings.Contains(other.String(), "security.ssl.internal")
	}, other)
	tms, err := cc.TaskManagers(ctx)
	if err != nil || len(tms.TaskManagers) != 2 {
		t.Errorf("TaskManagers after the refused ones: %+v, %v", tms, err)
	}
	jmLogs, _ := filepath.Glob(filepath.Join(w.home, "clusters", "*", "tls-session", "jobmanager", "gofl.log"))
	if len(jmLogs) != 1 {
		t.Fatalf("JobManager logs: %v", jmLogs)
	}
	waitFor(t, "the JobManager's log of a refused handshake", func() bool {
		b, _ := os.ReadFile(jmLogs[0])
		return strings.Contains(string(b), "internal TLS handshake refused")
	})

	// Anonymous gRPC: without a certificate, and with another CA's.
	foreignCfg, _ := foreign.Config()
	clusterCfg, _ := cluster.Config()
	for name, creds := range map[string]grpc.DialOption{
		"plain":   grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no cert": grpc.WithTransportCredentials(tlsconf.ClientCredentials(&tls.Config{InsecureSkipVerify: true})), //nolint:gosec // an attacker
		"foreign": grpc.WithTransportCredentials(tlsconf.ClientCredentials(foreignCfg)),
		"cluster": grpc.WithTransportCredentials(tlsconf.ClientCredentials(clusterCfg)),
	} {
		conn, err := grpc.NewClient(rpc, creds)
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		rm := pb.NewResourceManagerServiceClient(conn)
		_, regErr := rm.RegisterTaskExecutor(cctx, &pb.RegisterTaskExecutorRequest{ProtocolVersion: version.ProtocolVersion,
			Location: &pb.TaskManagerLocation{ResourceId: "made-up", RpcAddress: "127.0.0.1:1", Host: "127.0.0.1"}, NumberOfSlots: 1, InstanceId: "x"})
		_, discErr := rm.DisconnectTaskExecutor(cctx, &pb.DisconnectTaskExecutorRequest{ResourceId: "made-up", Cause: "attack"})
		var blobErr error
		stream, err := pb.NewBlobServiceClient(conn).GetBlobByKey(cctx, &pb.GetBlobByKeyRequest{Key: g.BinaryKey})
		if err == nil {
			_, blobErr = stream.Recv()
		} else {
			blobErr = err
		}
		ccancel()
		conn.Close()
		for call, err := range map[string]error{"RegisterTaskExecutor": regErr, "DisconnectTaskExecutor": discErr, "GetBlobByKey": blobErr} {
			if name == "cluster" {
				// The cluster's own certificate passes the transport.
				if status.Code(err) == codes.Unavailable {
					t.Errorf("%s with the cluster's certificate: %v", call, err)
				}
				continue
			}
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s %s: %v, want refused at the transport", name, call, err)
			}
		}
	}

	// No key in any log of the cluster.
	keyBody := strings.Split(strings.TrimSpace(string(key)), "\n")[1]
	_ = filepath.Walk(filepath.Join(w.home, "clusters"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("PRIVATE KEY")) || bytes.Contains(b, []byte(keyBody)) {
			t.Errorf("%s holds the cluster's key", p)
		}
		return nil
	})
	if err := cc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRESTTLSWithTokenE2E: a cluster serving REST over TLS with a bearer
// token: the client configured with the CA and token works; without the
// token it gets 401 naming the option; a plain-HTTP client gets nothing.
func TestRESTTLSWithTokenE2E(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := tlsconf.Generate("rest", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env, err := m.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		files[k] = v
	}
	const token = "tls-e2e-token-0123456789"
	cc, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: "rest-tls", Config: map[string]string{
		"security.ssl.rest.enabled": "true", "security.ssl.rest.cert": files[tlsconf.EnvCert],
		"security.ssl.rest.key": files[tlsconf.EnvKey], "security.ssl.rest.ca": files[tlsconf.EnvCA],
		"rest.authentication.token": token,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.desc.KillCluster(context.Background(), "rest-tls") })
	info := cc.Info
	restTLS, err := tlsconf.RESTClient(ctx, mustConf(t, "security.ssl.rest.enabled=true", "security.ssl.rest.ca="+files[tlsconf.EnvCA]), tlsconf.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	good, err := client.New(info.RESTAddress, client.WithTLS(restTLS), client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.ListJobs(ctx); err != nil {
		t.Fatalf("with TLS and the token: %v", err)
	}
	if !strings.HasPrefix(good.Address(), "https://") {
		t.Errorf("address %s", good.Address())
	}
	anon, _ := client.New(info.RESTAddress, client.WithTLS(restTLS), client.WithToken(""))
	_, err = anon.ListJobs(ctx)
	var he *client.Error
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), "rest.authentication.token") {
		t.Errorf("without the token: %v", err)
	}
	plain, _ := client.New(info.RESTAddress, client.WithToken(token))
	if _, err := plain.ListJobs(ctx); err == nil {
		t.Error("plain HTTP reached a TLS REST API")
	}
	cc.Client = good
	if err := cc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func mustConf(t *testing.T, dynamic ...string) *conf.Configuration {
	t.Helper()
	c, _, err := conf.Load(conf.LoadOptions{Env: []string{}, Dynamic: dynamic})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
