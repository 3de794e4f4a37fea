// Package storage is gofl's file-system layer: a small FileSystem interface
// with file:// (the local disk) and hdfs:// (github.com/colinmarc/hdfs/v2)
// implementations, and on top of it the staging area that deployments use.
//
// # File systems
//
// Open(ctx, uri, Options) dispatches on the URI's scheme and returns the
// FileSystem and the root path the URI names. For hdfs:// the NameNode
// comes from the URI's authority (host:port, port 8020 by default, or an HA
// nameservice defined in the Hadoop configuration), or, for hdfs:///path,
// from fs.defaultFS in core-site.xml. The Hadoop configuration is read from
// Options.HadoopConfDir, $HADOOP_CONF_DIR, $HADOOP_HOME/etc/hadoop or
// $HADOOP_HOME/conf. The client acts as Options.User, else
// $HADOOP_USER_NAME, else the OS user — or, with Kerberos, as the
// principal: KerberosOptions takes a keytab and principal, or the kinit
// ticket cache, plus the krb5.conf path and the NameNode's service
// principal (default dfs.namenode.kerberos.principal), and Kerberos is
// required when core-site.xml sets hadoop.security.authentication=kerberos.
// The Kerberos client is built here and handed to colinmarc/hdfs, which
// logs in to the KDC on its first NameNode connection; that path is not
// tested against a KDC.
//
// Every network step is bounded: connects by Options.DialTimeout, every
// NameNode read or write by Options.IOTimeout, so an unreachable or silent
// NameNode fails with ErrUnavailable naming its address instead of
// hanging. Closing an HDFS file retries, with backoff and a bound
// (Options.CloseRetries), while the NameNode reports the last block still
// replicating.
//
// Errors wrap a sentinel (ErrNotFound, ErrExist, ErrPermission,
// ErrUnavailable, ErrDigestMismatch, ErrInvalid); messages start with
// "storage: " and name the URI involved.
//
// # Staging
//
// Staging is the layout under the staging.dir option (default file://$HOME;
// expand it with conf.ExpandEnv before OpenStaging):
//
//	<staging.dir>/.gofl/<cluster-id>/gofl.yaml     configuration snapshot
//	<staging.dir>/.gofl/<cluster-id>/jobgraph.pb   per-job clusters' JobGraph
//	<staging.dir>/.gofl/blobs/sha256/<hex>         gofl and job binaries
//
// The blob cache is the file-system counterpart of internal/blob's local
// store, with the same keys ("sha256:<hex>", blob.KeyOf, blob.ParseKey):
// PutBlob hashes first and uploads nothing if the key is present (it
// reports whether it wrote), every write goes to a temporary name and is
// renamed (WriteFileAtomic), and every read is checked against the digest
// (OpenBlob, DownloadBlob into a blob.Store). RemoveCluster deletes a
// cluster's directory when the cluster ends; blobs are shared and stay.
//
// # Tests
//
// The tests run against file:// always and against hdfs:// when a NameNode
// answers at $GOFL_TEST_HDFS (default hdfs://127.0.0.1:9000, where
// `make minihdfs` puts Hadoop's MiniDFSCluster). Without one they skip,
// except under CI=true, where they fail; .ci/run starts MiniDFSCluster
// through scripts/minihdfs/with-hdfs.sh.
package storage
