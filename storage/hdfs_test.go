package storage

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableNameNodeFailsFastNamingIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)

	t.Run("refused", func(t *testing.T) {
		addr := closedPort(t)
		start := time.Now()
		_, _, err := Open(ctx, "hdfs://"+addr+"/staging", Options{User: "x", DialTimeout: 2 * time.Second})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "NameNode "+addr) {
			t.Fatalf("Open = %v, want ErrUnavailable naming %s", err, addr)
		}
		t.Logf("error after %v: %v", time.Since(start), err)
		if d := time.Since(start); d > 30*time.Second { // fast, not the test's two minutes
			t.Fatalf("took %v", d)
		}
	})

	// A NameNode that accepts connections but never answers must not hang
	// the caller: IOTimeout bounds the first call.
	t.Run("silent", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 16)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					close(accepted)
					return
				}
				accepted <- c // read nothing, answer nothing
			}
		}()
		defer func() {
			l.Close()
			for c := range accepted {
				c.Close()
			}
		}()
		addr := l.Addr().String()
		start := time.Now()
		_, _, err = Open(ctx, "hdfs://"+addr+"/", Options{User: "x", DialTimeout: time.Second, IOTimeout: time.Second})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Open = %v, want ErrUnavailable naming %s", err, addr)
		}
		t.Logf("error after %v: %v", time.Since(start), err)
		if d := time.Since(start); d > 30*time.Second { // fast, not the test's two minutes
			t.Fatalf("took %v", d)
		}
	})

	t.Run("context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := Open(cctx, "hdfs://"+closedPort(t)+"/", Options{User: "x"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Open(cancelled) = %v", err)
		}
	})
}

func writeSite(t *testing.T, dir, file string, props map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for k, v := range props {
		b.WriteString("  <property><name>" + k + "</name><value>" + v + "</value></property>\n")
	}
	b.WriteString("</configuration>\n")
	if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHadoopConfDirNameNodes(t *testing.T) {
	dir := t.TempDir()
	writeSite(t, dir, "core-site.xml", map[string]string{"fs.defaultFS": "hdfs://nn1.example:8021"})
	writeSite(t, dir, "hdfs-site.xml", map[string]string{
		"dfs.nameservices":                "prod",
		"dfs.ha.namenodes.prod":           "a, b",
		"dfs.namenode.rpc-address.prod.a": "nna.example:8020",
		"dfs.namenode.rpc-address.prod.b": "nnb.example:8020",
	})
	t.Setenv("HADOOP_CONF_DIR", dir)
	t.Setenv("HADOOP_HOME", "")
	hc, got, err := loadHadoopConf(Options{})
	if err != nil || got != dir || hc["fs.defaultFS"] != "hdfs://nn1.example:8021" {
		t.Fatalf("loadHadoopConf = %v, %q, %v", hc, got, err)
	}
	for _, tc := range []struct{ authority, want string }{
		{"", "nn1.example:8021"},                      // fs.defaultFS
		{"prod", "nna.example:8020,nnb.example:8020"}, // HA nameservice
		{"other.example", "other.example:8020"},       // default port
		{"other.example:9000", "other.example:9000"},  // as given
		{"[::1]:9000", "[::1]:9000"},                  // IPv6
	} {
		addrs, err := nameNodes(tc.authority, hc, dir)
		if err != nil || strings.Join(addrs, ",") != tc.want {
			t.Errorf("nameNodes(%q) = %v, %v; want %s", tc.authority, addrs, err, tc.want)
		}
	}

	// hdfs:/// goes to fs.defaultFS's NameNode; the error names it.
	addr := closedPort(t)
	writeSite(t, dir, "core-site.xml", map[string]string{"fs.defaultFS": "hdfs://" + addr})
	_, root, err := Open(testCtx(t), "hdfs:///user/gofl", Options{User: "x"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open(hdfs:///) = %q, %v; want ErrUnavailable naming %s", root, err, addr)
	}

	// Options.HadoopConfDir wins over the environment.
	other := t.TempDir()
	writeSite(t, other, "core-site.xml", map[string]string{"fs.defaultFS": "hdfs://from-options:8020"})
	hc, _, _ = loadHadoopConf(Options{HadoopConfDir: other})
	if addrs, _ := nameNodes("", hc, other); len(addrs) != 1 || addrs[0] != "from-options:8020" {
		t.Fatalf("nameNodes with HadoopConfDir = %v", addrs)
	}
	if _, _, err := loadHadoopConf(Options{HadoopConfDir: t.TempDir()}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty HadoopConfDir: %v", err)
	}

	// No configuration: hdfs:/// is a clear error.
	t.Setenv("HADOOP_CONF_DIR", t.TempDir())
	if _, _, err := Open(testCtx(t), "hdfs:///x", Options{User: "x"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "names no NameNode") {
		t.Fatalf("Open(hdfs:/// without config) = %v", err)
	}
	// A broken file is reported with its directory.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "core-site.xml"), []byte("<configuration><property>"), 0o644)
	if _, _, err := loadHadoopConf(Options{HadoopConfDir: bad}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("broken core-site.xml: %v", err)
	}
}

func TestHadoopUserName(t *testing.T) {
	t.Setenv("HADOOP_USER_NAME", "alice")
	if u, _ := hdfsUser(Options{}); u != "alice" {
		t.Fatalf("hdfsUser = %q, want alice from HADOOP_USER_NAME", u)
	}
	if u, _ := hdfsUser(Options{User: "bob"}); u != "bob" {
		t.Fatalf("hdfsUser = %q, want bob from the options", u)
	}
	t.Setenv("HADOOP_USER_NAME", "")
	if u, err := hdfsUser(Options{}); u == "" || err != nil {
		t.Fatalf("hdfsUser without config = %q, %v; want the OS user", u, err)
	}
}

func TestHadoopUserNameOnHDFS(t *testing.T) {
	uri := hdfsTestURI(t)
	t.Setenv("HADOOP_USER_NAME", "alice")
	ctx := testCtx(t)
	fsys, _, err := Open(ctx, uri+"/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if u := fsys.(*hdfsFS).User(); u != "alice" {
		t.Fatalf("client user %q", u)
	}
	p := "/gofl-test/user-" + randHex(4) + "/f"
	defer fsys.RemoveAll(context.Background(), "/gofl-test/"+strings.Split(p, "/")[2])
	if _, err := WriteFileAtomic(ctx, fsys, p, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	st, err := fsys.Stat(ctx, p)
	if err != nil || st.Owner != "alice" {
		t.Fatalf("owner %q (%v), want alice", st.Owner, err)
	}
	// File sources cut their splits along the blocks.
	if st.BlockSize <= 0 {
		t.Errorf("block size %d; want HDFS's", st.BlockSize)
	}
}

func TestKerberosPlumbing(t *testing.T) {
	dir := t.TempDir()
	krb5 := filepath.Join(dir, "krb5.conf")
	os.WriteFile(krb5, []byte(`[libdefaults]
  default_realm = EXAMPLE.COM
[realms]
  EXAMPLE.COM = {
    kdc = 127.0.0.1:1
  }
`), 0o644)
	kt := keytab.New()
	if err := kt.AddEntry("gofl/worker", "EXAMPLE.COM", "secret", time.Now(), 1, 18); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ktPath := filepath.Join(dir, "gofl.keytab")
	os.WriteFile(ktPath, b, 0o600)

	k := KerberosOptions{Keytab: ktPath, Principal: "gofl/worker", Krb5Conf: krb5, ServicePrincipal: "nn/_HOST@EXAMPLE.COM"}
	cl, spn, err := kerberosClient(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Credentials.UserName() != "gofl/worker" || cl.Credentials.Realm() != "EXAMPLE.COM" || spn != "nn/_HOST" {
		t.Fatalf("client %s@%s, spn %s", cl.Credentials.UserName(), cl.Credentials.Realm(), spn)
	}
	if !cl.Credentials.HasKeytab() {
		t.Fatal("credentials lack the keytab")
	}

	// The service principal defaults to hdfs-site.xml's.
	hc := map[string]string{"hadoop.security.authentication": "kerberos", "dfs.namenode.kerberos.principal": "hdfs/_HOST@EXAMPLE.COM"}
	if !kerberosWanted(KerberosOptions{}, hc) {
		t.Fatal("hadoop.security.authentication=kerberos not honoured")
	}
	if _, spn, err := kerberosClient(KerberosOptions{Keytab: ktPath, Principal: "gofl/worker@EXAMPLE.COM", Krb5Conf: krb5}, hc); err != nil || spn != "hdfs/_HOST" {
		t.Fatalf("spn %q, %v", spn, err)
	}

	for name, tc := range map[string]struct {
		k    KerberosOptions
		want string
	}{
		"no credentials":   {KerberosOptions{Krb5Conf: krb5}, "no keytab or ticket cache"},
		"missing keytab":   {KerberosOptions{Keytab: filepath.Join(dir, "nope"), Principal: "p", Krb5Conf: krb5}, "reading keytab " + filepath.Join(dir, "nope")},
		"no principal":     {KerberosOptions{Keytab: ktPath, Krb5Conf: krb5}, "without a principal"},
		"missing krb5conf": {KerberosOptions{Keytab: ktPath, Principal: "p", Krb5Conf: filepath.Join(dir, "none.conf")}, "reading krb5.conf"},
		"missing ccache":   {KerberosOptions{UseTicketCache: true, Krb5Conf: krb5}, "run kinit"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KRB5CCNAME", filepath.Join(dir, "no-ccache"))
			if _, _, err := kerberosClient(tc.k, hc); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, _, err := kerberosClient(KerberosOptions{Keytab: ktPath, Principal: "p", Krb5Conf: krb5}, nil); err == nil || !strings.Contains(err.Error(), "service principal") {
		t.Fatalf("no SPN: %v", err)
	}

	// Open logs in first: with Kerberos on and no KDC, it fails reaching
	// the KDC (not on missing options), naming the principal and keytab.
	addr := closedPort(t)
	_, _, err = Open(testCtx(t), "hdfs://"+addr+"/", Options{Kerberos: k, DialTimeout: time.Second})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no KDC answered") ||
		!strings.Contains(err.Error(), "gofl/worker with keytab "+ktPath) {
		t.Fatalf("Open with Kerberos = %v", err)
	}
}
