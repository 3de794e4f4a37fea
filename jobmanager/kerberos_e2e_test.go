package jobmanager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
)

// Checkpoints on a Kerberized HDFS: the JobManager (metadata) and the job
// runners (state) write them with a user keytab, or with a delegation
// token alone (over WebHDFS), and the job finishes exactly once.
func TestCheckpointOnKerberosHDFS(t *testing.T) {
	parallel(t)
	k := storagetest.KerberosHDFSCluster(t)
	ctx := context.Background()
	krb := storage.Options{HadoopConfDir: k.ConfDir,
		Kerberos: storage.KerberosOptions{Keytab: k.Keytab, Principal: k.Principal, Krb5Conf: k.Krb5Conf}}
	tok, err := storage.ObtainDelegationToken(ctx, k.NameNode, krb, "")
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "tokens.json")
	if err := storage.WriteDelegationTokens(tokFile, []storage.DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		security map[string]string
	}{
		{"keytab", map[string]string{"fs.hdfs.hadoopconf": k.ConfDir, "security.kerberos.login.keytab": k.Keytab,
			"security.kerberos.login.principal": k.Principal, "security.kerberos.krb5-conf.path": k.Krb5Conf}},
		{"delegation-token", map[string]string{"fs.hdfs.hadoopconf": k.ConfDir, "security.delegation.tokens.file": tokFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel := fmt.Sprintf("/gofl-test/krb-checkpoints-%s-%d", tc.name, time.Now().UnixNano())
			settings := checkpointSettings(k.NameNode + rel)
			for key, v := range tc.security {
				settings[key] = v
			}
			c := newCluster(t, settings)
			c.startTaskManagerProcessWith("tm-0", 2, tc.security)
			c.waitForTaskManagers(1)
			out := filepath.Join(t.TempDir(), "out")
			const count, keys = 6000, 8
			id := c.keyedCountsJob(2, count, keys, 1500, out)
			c.waitFor(id, 60*time.Second, "RUNNING")
			c.waitCheckpointAfter(id, 0, 60*time.Second)
			c.waitFor(id, 3*time.Minute, "FINISHED")
			checkKeyedCounts(t, out, count, keys)

			fsys, _, err := storage.Open(ctx, k.NameNode+"/", krb)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			defer fsys.RemoveAll(context.Background(), rel)
			// A checkpoint completed, so the job's directory is there.
			if _, err := fsys.Stat(ctx, rel+"/"+id); err != nil {
				t.Fatalf("the job's checkpoint directory on HDFS: %v", err)
			}
		})
	}
}
