package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/internal/tlsconf"
)

// clusterProcesses lists the pids of the running processes whose
// environment names the cluster (GOFL_CLUSTER_ID, set by the local
// provider for JobManagers, supervisors and TaskManagers).
func clusterProcesses(t *testing.T, clusterID string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == "GOFL_CLUSTER_ID="+clusterID {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// TestPasswordsNotOnCommandLinesE2E: a cluster with internal TLS from
// PKCS12 keystores with passwords, and a REST token, runs wordcount;
// neither password nor token is on the command line of any of its
// processes (ps shows command lines to every user), in the REST config
// view or in a log: the client stages them 0600 (deployment.secrets-file)
// and the JobManager's TaskManagers read them from there.
func TestPasswordsNotOnCommandLinesE2E(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const id = "secrets-session"
	ksPass, keyPass, tsPass := "ks-pw-4f1d2c9a7b", "ks-pw-4f1d2c9a7b", "ts-pw-8e3b6a0c51"
	const token = "rest-token-6d2e9b1f40a7"

	m, err := tlsconf.Generate(id, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := tls.X509KeyPair(m.Cert, m.Key)
	leaf, _ := x509.ParseCertificate(kp.Certificate[0])
	block, _ := pem.Decode(m.CA)
	ca, _ := x509.ParseCertificate(block.Bytes)
	ks, err := pkcs12.Modern.Encode(kp.PrivateKey, leaf, nil, ksPass)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca}, tsPass)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ks.p12": ks, "ts.p12": ts} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: id, TaskManagers: 2, Config: map[string]string{
		"taskmanager.numberOfTaskSlots":  "1",
		"security.ssl.internal.enabled":  "true",
		"security.ssl.internal.keystore": filepath.Join(dir, "ks.p12"), "security.ssl.internal.keystore-password": ksPass,
		"security.ssl.internal.key-password":        keyPass,
		"security.ssl.internal.truststore":          filepath.Join(dir, "ts.p12"),
		"security.ssl.internal.truststore-password": tsPass,
		"rest.authentication.token":                 token,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.desc.KillCluster(context.Background(), id) })
	good, err := client.New(cc.Info.RESTAddress, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	cc.Client = good

	// Both TaskManagers register over internal TLS with the keystore they
	// could open only with the passwords from the secrets file.
	waitFor(t, "two TaskManagers", func() bool {
		tms, err := cc.TaskManagers(ctx)
		return err == nil && len(tms.TaskManagers) == 2
	})
	out := filepath.Join(w.home, "out")
	g, err := client.PlanJob(ctx, w.wc, []string{"--input", w.input, "--output", out}, client.PlanOptions{Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g.BinaryKey, _, err = cc.UploadBlob(ctx, w.wc); err != nil {
		t.Fatal(err)
	}
	jobID, err := cc.SubmitJob(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := cc.WaitForJobResult(ctx, jobID); err != nil || r.ApplicationStatus != "SUCCEEDED" {
		t.Fatalf("wordcount with PKCS12 keystores: %+v, %v", r, err)
	}
	w.checkCounts(t, out)

	secrets := []string{ksPass, tsPass, token}
	pids := clusterProcesses(t, id)
	if len(pids) < 3 { // JobManager (and its supervisor) and two TaskManagers
		t.Fatalf("found %d processes of the cluster: %v", len(pids), pids)
	}
	for _, pid := range pids {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue // ended meanwhile
		}
		for _, s := range secrets {
			if bytes.Contains(cmdline, []byte(s)) {
				t.Errorf("process %d has a secret on its command line: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			}
		}
	}

	// The staged secrets file is private.
	st, err := os.Stat(filepath.Join(w.home, ".gofl", id, client.SecretsFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("staged %s: %v %v, want 0600", client.SecretsFile, st, err)
	}
	// The REST config view and the logs show none.
	req, _ := http.NewRequestWithContext(ctx, "GET", good.Address()+"/jobmanager/config", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "security.ssl.internal.keystore") {
		t.Errorf("GET /jobmanager/config: %d %s", resp.StatusCode, body.String())
	}
	for _, s := range secrets {
		if strings.Contains(body.String(), s) {
			t.Errorf("GET /jobmanager/config shows a secret")
		}
	}
	if err := cc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = filepath.Walk(filepath.Join(w.home, "clusters"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
}
