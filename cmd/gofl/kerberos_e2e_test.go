package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/ha/zktest"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
)

// Wordcount on a Kerberized HDFS with a user keytab
// (security.kerberos.login.*): the client stages the binary and the
// JobGraph there, the JobManager reads them, the TaskManager fetches the
// blob, and the job's text source and sink read and write hdfs://. A stale
// keytab fails the run with a message naming the principal and keytab.
func TestDeployKerberosHDFSE2E(t *testing.T) {
	t.Parallel()
	k, e, fsys, base := newKerberosE2E(t, "gofl-kerberos-e2e")
	kerberos := func(keytab string) []string {
		return []string{"-D", "fs.hdfs.hadoopconf=" + k.ConfDir,
			"-D", "security.kerberos.login.keytab=" + keytab,
			"-D", "security.kerberos.login.principal=" + k.Principal,
			"-D", "security.kerberos.krb5-conf.path=" + k.Krb5Conf}
	}

	// Delegation tokens on (the default): the client obtains one and
	// stages it, the TaskManagers and the job use it instead of the keytab.
	e.extraArg = append(kerberos(k.Keytab), "-D", "log.level=info")
	out := base + "/out"
	r := e.run("run", "-m", "per-job", e.wc, "--input", k.NameNode+base+"/input.txt", "--output", k.NameNode+out)
	expectOK(t, r, "run -m per-job on Kerberized HDFS")
	if !strings.Contains(r.stdout+r.stderr, "obtained an HDFS delegation token for the cluster") {
		t.Errorf("the client obtained no delegation token:\n%s\n%s", r.stdout, r.stderr)
	}
	e.checkHDFSCounts(fsys, out, k.Principal)

	// Off: the keytab everywhere.
	e.extraArg = append(kerberos(k.Keytab), "-D", "security.delegation.tokens.enabled=false")
	out = base + "/out-keytab"
	r = e.run("run", "-m", "per-job", e.wc, "--input", k.NameNode+base+"/input.txt", "--output", k.NameNode+out)
	expectOK(t, r, "run -m per-job on Kerberized HDFS without delegation tokens")
	e.checkHDFSCounts(fsys, out, k.Principal)

	e.extraArg = kerberos(k.WrongKeytab)
	r = e.run("run", "-m", "per-job", e.wc, "--input", k.NameNode+base+"/input.txt", "--output", k.NameNode+base+"/out2")
	if r.code == 0 || !strings.Contains(r.stderr, k.Principal) || !strings.Contains(r.stderr, k.WrongKeytab) ||
		!strings.Contains(r.stderr, "keytab incorrect") {
		t.Fatalf("run with a stale keytab: exit %d, want a failure naming %s, %s and the cause\n%s\n%s",
			r.code, k.Principal, k.WrongKeytab, r.stdout, r.stderr)
	}
}

// checkHDFSCounts checks wordcount's part files in an HDFS directory, and
// that the principal's user owns them.
func (e *e2e) checkHDFSCounts(fsys storage.FileSystem, out, principal string) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	ents, err := fsys.ReadDir(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, en := range ents {
		b, err := storage.ReadFile(ctx, fsys, path.Join(out, en.Name))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		if en.Owner != strings.Split(principal, "@")[0] {
			t.Errorf("%s is owned by %q, want the principal's user", en.Name, en.Owner)
		}
	}
	sort.Strings(lines)
	if got, want := strings.Join(lines, ","), "be 4,is 1,not 2,or 2,question 1,that 1,the 1,to 4"; got != want {
		t.Fatalf("word counts on HDFS = %q, want %q", got, want)
	}
}

// A session cluster on a Kerberized HDFS uses delegation tokens: the
// client obtains one and stages it, the session's JobManager loads it
// (and renews it), and its TaskManagers, started with the token file and
// no keytab, run wordcount reading and writing hdfs:// over the NameNode's
// RPC port with the token alone.
func TestSessionKerberosHDFSTokensE2E(t *testing.T) {
	t.Parallel()
	k, e, fsys, base := newKerberosE2E(t, "gofl-kerberos-session-e2e")
	e.extraArg = []string{"-D", "fs.hdfs.hadoopconf=" + k.ConfDir, "-D", "security.kerberos.login.keytab=" + k.Keytab,
		"-D", "security.kerberos.login.principal=" + k.Principal, "-D", "security.kerberos.krb5-conf.path=" + k.Krb5Conf,
		"-D", "log.level=info"}
	r := e.run("session", "start", "-t", "local", "--name", "ks", "-n", "1")
	expectOK(t, r, "session start on Kerberized HDFS")
	if !strings.Contains(r.stdout+r.stderr, "obtained an HDFS delegation token for the cluster") {
		t.Errorf("the client obtained no delegation token:\n%s\n%s", r.stdout, r.stderr)
	}
	defer e.run("session", "stop", "ks")
	out := base + "/out"
	r = e.run("run", "-m", "session", "-c", "ks", e.wc, "--input", k.NameNode+base+"/input.txt", "--output", k.NameNode+out)
	expectOK(t, r, "run -m session on Kerberized HDFS")
	e.checkHDFSCounts(fsys, out, k.Principal)

	jmLog, _ := os.ReadFile(filepath.Join(e.clustersDir(), "ks", "jobmanager", "gofl.log"))
	if !strings.Contains(string(jmLog), "HDFS delegation tokens loaded") {
		t.Errorf("the session JobManager loaded no delegation tokens:\n%s", jmLog)
	}
	checkTaskManagersUseTokens(t, e, "ks")
	expectOK(t, e.run("session", "stop", "ks"), "session stop")
}

// newKerberosE2E is a world staging on the Kerberized MiniDFS under a new
// /<prefix>/<n>, with e2eText at <base>/input.txt, written with the test
// keytab through fsys; the directory is removed, and fsys closed, after
// the test.
func newKerberosE2E(t *testing.T, prefix string) (storagetest.KerberosHDFS, *e2e, storage.FileSystem, string) {
	t.Helper()
	k := storagetest.KerberosHDFSCluster(t)
	e := newE2E(t)
	base := fmt.Sprintf("/%s/%d", prefix, time.Now().UnixNano())
	e.staging = k.NameNode + base + "/staging"
	opts := storage.Options{
		HadoopConfDir: k.ConfDir,
		Kerberos:      storage.KerberosOptions{Keytab: k.Keytab, Principal: k.Principal, Krb5Conf: k.Krb5Conf},
	}
	ctx := context.Background()
	fsys, _, err := storage.Open(ctx, k.NameNode+"/", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	t.Cleanup(func() { _ = fsys.RemoveAll(context.Background(), base) })
	if _, err := storage.WriteFileAtomic(ctx, fsys, base+"/input.txt", strings.NewReader(e2eText)); err != nil {
		t.Fatal(err)
	}
	return k, e, fsys, base
}

// A session on the Nomad test agent, staging on the Kerberized HDFS (the
// production case): the client obtains a delegation token and stages it
// 0600; the leading JobManager sends it to each TaskManager over RPC, on
// registration and after every renewal (Flink's
// TaskExecutor.updateDelegationTokens), so the TaskManagers' job specs
// name neither a keytab nor a token file, and hold no token. A renewal
// reaches the TaskManager (its log counts the updates, never showing the
// token); wordcount then reads and writes hdfs:// as the principal with
// the renewed token alone.
func TestNomadKerberosHDFSTokensE2E(t *testing.T) {
	t.Parallel()
	k, e, fsys, base := newKerberosE2E(t, "gofl-kerberos-nomad-e2e")
	startNomadAgent(t, e)
	na := newNomadAgent(t, strings.TrimPrefix(e.extraArg[len(e.extraArg)-1], "provider.nomad.address="), false)
	// Internal TLS from the user's PKI on the nodes: a per-cluster CA
	// staged on hdfs:// would need a login to read before registering.
	pki, err := tlsconf.Generate("nk", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pkiEnv, err := pki.WriteFiles(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []string{"cert", "key", "ca"} { // WriteFiles' order
		_, path, _ := strings.Cut(pkiEnv[i], "=")
		e.extraArg = append(e.extraArg, "-D", "security.ssl.internal."+o+"="+path)
	}
	e.extraArg = append(e.extraArg, "-D", "fs.hdfs.hadoopconf="+k.ConfDir, "-D", "security.kerberos.login.keytab="+k.Keytab,
		"-D", "security.kerberos.login.principal="+k.Principal, "-D", "security.kerberos.krb5-conf.path="+k.Krb5Conf,
		// Renewal every few seconds (of a 24 h token), so one reaches the TaskManager.
		"-D", "security.delegation.tokens.renewal.time-ratio=0.00005", "-D", "log.level=info")
	const x = "nk"
	expectOK(t, e.run("session", "start", "-t", "nomad", "--name", x, "-n", "1"), "session start -t nomad on Kerberized HDFS")
	defer e.run("session", "stop", x)
	staged := e.staging + "/" + storage.StagingSubdir + "/" + x + "/" + storage.DelegationTokensFile
	tokens, err := storage.ReadStagedDelegationTokens(context.Background(), staged, storage.Options{HadoopConfDir: k.ConfDir,
		Kerberos: storage.KerberosOptions{Keytab: k.Keytab, Principal: k.Principal, Krb5Conf: k.Krb5Conf}})
	if err != nil || len(tokens) != 1 || tokens[0].Token == "" {
		t.Fatalf("staged delegation tokens %v: %v", tokens, err)
	}

	// A renewal reaches the TaskManager: its second token update.
	var tmLog string
	waitFor(t, 90*time.Second, func() error {
		logs, _ := filepath.Glob(filepath.Join(e.agentData, "alloc", "*", "alloc", "logs", "taskmanager.stderr.0"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if strings.Contains(string(b), `"token_updates":2`) {
				tmLog = string(b)
				return nil
			}
		}
		var lines []string // the token lines of every log (they never show a token)
		all, _ := filepath.Glob(filepath.Join(e.agentData, "alloc", "*", "alloc", "logs", "*.stderr.0"))
		for _, l := range all {
			b, _ := os.ReadFile(l)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "token") {
					lines = append(lines, filepath.Base(l)+": "+line)
				}
			}
		}
		return fmt.Errorf("no TaskManager log (of %d) shows a second delegation token update:\n%s", len(logs), strings.Join(lines, "\n"))
	})
	if strings.Contains(tmLog, tokens[0].Token) {
		t.Error("the TaskManager's log shows the delegation token")
	}

	out := base + "/out"
	r := e.run("run", "-m", "session", "-c", x, e.wc, "--input", k.NameNode+base+"/input.txt", "--output", k.NameNode+out)
	expectOK(t, r, "run -m session on Nomad with Kerberized HDFS")
	e.checkHDFSCounts(fsys, out, k.Principal)

	// The job specs: the TaskManagers' name no keytab and no token file;
	// none holds the token.
	jobs, _, err := na.api.Jobs().PrefixList("gofl-" + x + "-")
	if err != nil {
		t.Fatal(err)
	}
	tms := 0
	for _, j := range jobs {
		job, _, err := na.api.Jobs().Info(j.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := json.Marshal(job)
		if strings.Contains(string(spec), tokens[0].Token) {
			t.Errorf("job %s holds the delegation token", j.ID)
		}
		if job.Meta["gofl.role"] != "taskmanager" {
			continue
		}
		tms++
		if strings.Contains(string(spec), "security.delegation.tokens.file") || strings.Contains(string(spec), "security.kerberos.login.") {
			t.Errorf("TaskManager job %s: want no token file and no Kerberos login:\n%s", j.ID, spec)
		}
	}
	if tms == 0 {
		t.Errorf("no TaskManager job of %s among %d jobs", x, len(jobs))
	}
	expectOK(t, e.run("session", "stop", x), "session stop")
	na.waitClusterGone(t, x)
}

// checkTaskManagersUseTokens checks that the local session's TaskManagers
// run with the token file and without the keytab.
func checkTaskManagersUseTokens(t *testing.T, e *e2e, session string) {
	t.Helper()
	tms, _ := filepath.Glob(filepath.Join(e.clustersDir(), session, "taskmanager-*", "gofl.log"))
	if len(tms) == 0 {
		t.Fatal("no TaskManager directory")
	}
	found := false
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), "taskmanager") || !strings.Contains(string(cmdline), "deployment.cluster-id="+session+"\x00") {
			continue
		}
		found = true
		if strings.Contains(string(cmdline), "security.kerberos.login.keytab") || !strings.Contains(string(cmdline), "security.delegation.tokens.file=") {
			t.Errorf("TaskManager %s: want the token file and no keytab: %q", ent.Name(), cmdline)
		}
	}
	if !found {
		t.Errorf("no TaskManager process of the session %s found", session)
	}
}

// An HA session (two JobManagers, ZooKeeper) on the Kerberized HDFS with
// TaskManagers that hold tokens only: the leader is killed -9 while a
// keyed-counts job checkpoints to hdfs://; the standby, which loaded the
// staged tokens at start, takes over, restores the job from its last
// checkpoint on hdfs://, renews the tokens, and the output is exact.
func TestSessionKerberosHAFailoverE2E(t *testing.T) {
	t.Parallel()
	quorum := zktest.Quorum(t)
	k, e, fsys, base := newKerberosE2E(t, "gofl-kerberos-ha-e2e")
	haSettings := map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": quorum,
		"high-availability.cluster-id": fmt.Sprintf("/e2e-krb-%d", time.Now().UnixNano()),
		"high-availability.storageDir": "file://" + filepath.Join(e.home, "ha")}
	settings := map[string]string{"fs.hdfs.hadoopconf": k.ConfDir, "security.kerberos.login.keytab": k.Keytab,
		"security.kerberos.login.principal": k.Principal, "security.kerberos.krb5-conf.path": k.Krb5Conf, "log.level": "info",
		"execution.checkpointing.interval": "200 ms", "state.checkpoints.dir": k.NameNode + base + "/checkpoints",
		"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "50", "restart-strategy.fixed-delay.delay": "100 ms",
		// Renewal every few seconds (of a 24 h token), so the new leader's shows.
		"security.delegation.tokens.renewal.time-ratio": "0.00005"}
	for k, v := range haSettings {
		settings[k] = v
	}
	for k, v := range settings {
		e.extraArg = append(e.extraArg, "-D", k+"="+v)
	}
	testjob := testJobBinaryForCLI(t) // before the session: building it can take minutes on a loaded machine
	expectOK(t, e.run("session", "start", "-t", "local", "--name", "kha", "--jobmanagers", "2", "-n", "1"), "session start --jobmanagers 2 on Kerberized HDFS")
	defer e.run("session", "stop", "kha")
	checkTaskManagersUseTokens(t, e, "kha")
	const count, keys = 4000, 4
	out := filepath.Join(e.home, "out")
	r := e.run("run", "-m", "session", "-c", "kha", "-d", testjob, "keyed-counts", "--count", strconv.Itoa(count),
		"--keys", strconv.Itoa(keys), "--rate", "1000", "--output", out)
	expectOK(t, r, "run -d keyed-counts")
	m := submitLine.FindStringSubmatch(r.stdout + r.stderr)
	if m == nil {
		t.Fatalf("no job ID in the output:\n%s\n%s", r.stdout, r.stderr)
	}
	job := m[1]

	pid, leader, survivor, survivorDir := sessionLeader(t, e, "kha", haSettings)
	lcl, err := client.New(leader)
	if err != nil {
		t.Fatal(err)
	}
	last := waitCheckpointAfter(t, lcl, job, 0)
	survivorLog := filepath.Join(survivorDir, "gofl.log")
	renewals := func() int {
		b, _ := os.ReadFile(survivorLog)
		return strings.Count(string(b), "renewed the HDFS delegation token")
	}
	before := renewals()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(survivor)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() error {
		d, err := cl.JobDetails(context.Background(), job)
		if err != nil {
			return err
		}
		if d.State != "FINISHED" {
			return fmt.Errorf("job %s", d.State)
		}
		return nil
	})
	st, err := cl.JobCheckpoints(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest.Restored == nil || st.Latest.Restored.ID < last {
		t.Errorf("the new leader restored %+v, want checkpoint %d or later", st.Latest.Restored, last)
	}
	checkKeyedCountsOutput(t, out, count, keys)
	if ents, err := fsys.ReadDir(context.Background(), base+"/checkpoints"); err != nil || len(ents) == 0 {
		t.Errorf("no checkpoints on HDFS: %v %v", ents, err)
	}
	// The survivor loaded the staged tokens and renews them after the kill.
	waitFor(t, time.Minute, func() error {
		b, _ := os.ReadFile(survivorLog)
		if !strings.Contains(string(b), "HDFS delegation tokens loaded") || renewals() <= before {
			return fmt.Errorf("the surviving JobManager has not loaded the tokens, or renewed none since the kill (%s)", survivorLog)
		}
		return nil
	})
	expectOK(t, e.run("session", "stop", "kha"), "session stop")
}

var longToken = regexp.MustCompile(`[A-Za-z0-9_-]{100,}`)

// A job submitted to a session with its user's keytab acts as that user:
// the session's user (gofl) cannot write in another user's private directory;
// submitted with the other user's keytab, the client obtains that user's delegation
// tokens (renewer: the session's user) and ships them with the job, the
// JobManager stages them 0600, names them to the TaskManagers and renews
// them (their expiry is unknown to the client, which may not renew them),
// and the job reads and writes the directory as its submitter; once it
// ended the tokens are cancelled and their staged file is gone. A stale keytab fails
// the run naming the principal and keytab. No token shows in any log.
func TestSessionKerberosJobTokensE2E(t *testing.T) {
	t.Parallel()
	k, e, fsys, base := newKerberosE2E(t, "gofl-kerberos-jobtokens-e2e")
	if k.OtherKeytab == "" {
		t.Fatal("the KDC has no second user (GOFL_TEST_KDC_OTHER_*): scripts/kdc/run.sh makes one")
	}
	ctx := context.Background()
	// <base>/shared is open to all; <base>/shared/private is the other user's, 0700.
	if err := fsys.MkdirAll(ctx, base+"/shared"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.(storage.Chmoder).Chmod(ctx, base+"/shared", 0o777); err != nil {
		t.Fatal(err)
	}
	other, _, err := storage.Open(ctx, k.NameNode+"/", storage.Options{HadoopConfDir: k.ConfDir,
		Kerberos: storage.KerberosOptions{Keytab: k.OtherKeytab, Principal: k.OtherPrincipal, Krb5Conf: k.Krb5Conf}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	private := base + "/shared/private"
	if err := other.MkdirAll(ctx, private); err != nil {
		t.Fatal(err)
	}
	if err := other.(storage.Chmoder).Chmod(ctx, private, 0o700); err != nil {
		t.Fatal(err)
	}
	// The input is the other user's too, but readable: the file source's
	// splits are listed by the JobManager with the cluster's credentials
	// (cluster-wide, as Flink's tokens are); the tasks write as the job's.
	input := base + "/shared/input.txt"
	if _, err := storage.WriteFileAtomic(ctx, other, input, strings.NewReader(e2eText)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = other.RemoveAll(context.Background(), private)
		_ = other.RemoveAll(context.Background(), input)
	})

	common := []string{"-D", "fs.hdfs.hadoopconf=" + k.ConfDir, "-D", "security.kerberos.krb5-conf.path=" + k.Krb5Conf, "-D", "log.level=info"}
	login := func(principal, keytab string) []string {
		return append(slices.Clone(common), "-D", "security.kerberos.login.keytab="+keytab, "-D", "security.kerberos.login.principal="+principal)
	}
	e.extraArg = login(k.Principal, k.Keytab)
	expectOK(t, e.run("session", "start", "-t", "local", "--name", "kj", "-n", "1"), "session start on Kerberized HDFS")
	defer e.run("session", "stop", "kj")
	wc := func(out string) e2eResult {
		return e.run("run", "-m", "session", "-c", "kj", e.wc, "--input", k.NameNode+input, "--output", k.NameNode+out)
	}
	var logs []string // every client output, for the secrets check

	// The session's user cannot use the directory.
	if err := fsys.MkdirAll(ctx, private+"/out"); !errors.Is(err, storage.ErrPermission) {
		t.Fatalf("the session's user writing in the other user's directory: %v, want ErrPermission", err)
	}
	e.extraArg = login(k.OtherPrincipal, k.OtherKeytab)
	r := wc(private + "/out")
	logs = append(logs, r.stdout, r.stderr)
	expectOK(t, r, "run with the other user's keytab")
	if !strings.Contains(r.stdout+r.stderr, "obtained an HDFS delegation token for the job") {
		t.Errorf("the client obtained no token for the job:\n%s\n%s", r.stdout, r.stderr)
	}
	e.checkHDFSCounts(other, private+"/out", k.OtherPrincipal)

	e.extraArg = login(k.Principal, k.WrongKeytab)
	r = wc(private + "/out-wrong")
	logs = append(logs, r.stdout, r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, k.Principal) || !strings.Contains(r.stderr, k.WrongKeytab) || !strings.Contains(r.stderr, "keytab incorrect") {
		t.Fatalf("run with a stale keytab: exit %d, want a failure naming %s, %s and the cause\n%s\n%s", r.code, k.Principal, k.WrongKeytab, r.stdout, r.stderr)
	}

	e.extraArg = login(k.Principal, k.Keytab) // the session's user, to stop it

	// The JobManager staged the job's tokens, and cancelled and removed
	// them once the job finished.
	jmLog := filepath.Join(e.clustersDir(), "kj", "jobmanager", "gofl.log")
	st, err := storage.OpenStaging(ctx, e.staging, storage.Options{HadoopConfDir: k.ConfDir,
		Kerberos: storage.KerberosOptions{Keytab: k.Keytab, Principal: k.Principal, Krb5Conf: k.Krb5Conf}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir, _ := st.ClusterDir("kj")
	waitFor(t, time.Minute, func() error {
		b, _ := os.ReadFile(jmLog)
		renewed := regexp.MustCompile(`"component":"job-delegation-tokens".*"renewed the HDFS delegation token"`)
		if !strings.Contains(string(b), "staged the job's own HDFS delegation token") || !renewed.Match(b) ||
			!strings.Contains(string(b), "cancelled the job's HDFS delegation token") {
			return errors.New("the JobManager has not staged, renewed and cancelled the job's tokens")
		}
		ents, err := st.FileSystem().ReadDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, en := range ents {
			if strings.HasPrefix(en.Name, "job-") {
				return fmt.Errorf("staged job tokens left: %s", en.Name)
			}
		}
		return nil
	})
	_ = filepath.Walk(filepath.Join(e.clustersDir(), "kj"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".log") {
			b, _ := os.ReadFile(p)
			logs = append(logs, string(b))
		}
		return nil
	})
	for _, l := range logs {
		if m := longToken.FindString(l); m != "" {
			t.Errorf("a log holds what looks like a token: %.20s...", m)
		}
	}
	expectOK(t, e.run("session", "stop", "kj"), "session stop")
}
