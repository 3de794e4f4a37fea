package org.gofl.minihdfs;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * Starts a one-DataNode MiniDFSCluster in the foreground for gofl's storage
 * tests: the NameNode RPC at hdfs://127.0.0.1:PORT and WebHDFS on the HTTP
 * port. Prints a line starting with "MINIHDFS READY" once the cluster is up,
 * and shuts it down (removing its data) on SIGTERM or SIGINT.
 *
 * <p>System properties: minihdfs.port (9000), minihdfs.http.port (9870),
 * minihdfs.dir (a fresh temporary directory; removed on exit).
 *
 * <p>minihdfs.datanode.hosts (e.g. "127.0.0.2,127.0.0.3"; default empty: one
 * DataNode on 127.0.0.1) starts one DataNode per host, each registered
 * under that host name (dfs.datanode.hostname), so block locations name
 * distinct loopback hosts for locality tests. The DataNodes listen on all
 * addresses: the NameNode hands clients the address it saw a DataNode
 * connect from (127.0.0.1), so its data port must answer there too.
 *
 * <p>With minihdfs.kerberos.keytab set the cluster is Kerberized
 * (hadoop.security.authentication=kerberos): the NameNode and DataNode log in
 * as hdfs/localhost@REALM and WebHDFS takes SPNEGO as HTTP/localhost@REALM,
 * both from that keytab (REALM: minihdfs.kerberos.realm, GOFL.TEST; the JVM
 * needs -Djava.security.krb5.conf). Block access tokens are on and data
 * transfer is SASL-authenticated (dfs.data.transfer.protection=authentication)
 * on unprivileged ports, which ignore.secure.ports.for.testing allows without
 * HTTPS. Permissions are on (off without Kerberos), with the root 1777.
 */
public final class MiniHdfs {
  public static void main(String[] args) throws Exception {
    int port = Integer.getInteger("minihdfs.port", 9000);
    int httpPort = Integer.getInteger("minihdfs.http.port", 9870);
    String dirProp = System.getProperty("minihdfs.dir", "");
    Path base = dirProp.isEmpty()
        ? Files.createTempDirectory("gofl-minihdfs-")
        : Files.createDirectories(Path.of(dirProp));

    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toAbsolutePath().toString());
    conf.setBoolean("dfs.webhdfs.enabled", true);
    // Tests run as any user (HADOOP_USER_NAME); owners are still recorded.
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.set("dfs.namenode.rpc-address", "127.0.0.1:" + port);
    conf.set("dfs.namenode.http-address", "127.0.0.1:" + httpPort);
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setInt("dfs.replication", 1);
    // A small block size lets tests cross block boundaries cheaply.
    conf.setLong("dfs.namenode.fs-limits.min-block-size", 1024);
    // A shared test machine's disk runs low at times; the NameNode's
    // default 100 MB reserve would put the cluster in safe mode then.
    conf.setLong("dfs.namenode.resource.du.reserved", 1L << 20);

    String keytab = System.getProperty("minihdfs.kerberos.keytab", "");
    if (!keytab.isEmpty()) {
      kerberize(conf, keytab, System.getProperty("minihdfs.kerberos.realm", "GOFL.TEST"));
    }

    String[] dnHosts = System.getProperty("minihdfs.datanode.hosts", "").trim().isEmpty()
        ? new String[0]
        : System.getProperty("minihdfs.datanode.hosts").trim().split("\\s*,\\s*");

    long start = System.nanoTime();
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(port)
        .nameNodeHttpPort(httpPort)
        .numDataNodes(dnHosts.length == 0 ? 1 : 0)
        .format(true)
        .manageNameDfsDirs(true)
        .build();
    if (dnHosts.length > 0) {
      Configuration dnConf = new Configuration(conf);
      dnConf.set("dfs.datanode.address", "0.0.0.0:0");
      dnConf.set("dfs.datanode.http.address", "0.0.0.0:0");
      dnConf.set("dfs.datanode.ipc.address", "0.0.0.0:0");
      // One at a time: hosts[i] becomes DataNode i's dfs.datanode.hostname.
      for (String host : dnHosts) {
        cluster.startDataNodes(dnConf, 1, true, null, null, new String[] {host}, null, false, true);
      }
    }
    cluster.waitActive();
    cluster.waitClusterUp();
    if (!keytab.isEmpty()) {
      // Permissions are on (kerberize): the root is open to every user,
      // as /tmp is, so tests make their own directories under it.
      cluster.getFileSystem().setPermission(new org.apache.hadoop.fs.Path("/"),
          new org.apache.hadoop.fs.permission.FsPermission((short) 01777));
    }

    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      System.out.println("MINIHDFS STOPPING");
      try {
        cluster.shutdown(true);
      } catch (Throwable t) {
        System.err.println("minihdfs: shutdown: " + t);
      }
      if (dirProp.isEmpty()) {
        deleteTree(base);
      }
      stopped.countDown();
    }, "minihdfs-shutdown"));

    System.out.printf("MINIHDFS READY hdfs://127.0.0.1:%d webhdfs=http://127.0.0.1:%d dir=%s%s%s (%.1fs)%n",
        port, httpPort, base, keytab.isEmpty() ? "" : " kerberos",
        dnHosts.length == 0 ? "" : " datanodes=" + String.join(",", dnHosts), (System.nanoTime() - start) / 1e9);
    System.out.flush();
    stopped.await();
  }

  private static void kerberize(Configuration conf, String keytab, String realm) throws IOException {
    String service = "hdfs/localhost@" + realm;
    String http = "HTTP/localhost@" + realm;
    conf.set("hadoop.security.authentication", "kerberos");
    // Users are authenticated, so permissions hold: one user's private
    // directory is closed to another (a job acting as its submitter).
    conf.setBoolean("dfs.permissions.enabled", true);
    conf.set("hadoop.rpc.protection", "authentication");
    conf.set("dfs.namenode.kerberos.principal", service);
    conf.set("dfs.namenode.keytab.file", keytab);
    conf.set("dfs.datanode.kerberos.principal", service);
    conf.set("dfs.datanode.keytab.file", keytab);
    conf.set("dfs.web.authentication.kerberos.principal", http);
    conf.set("dfs.web.authentication.kerberos.keytab", keytab);
    // Since Hadoop 3.2.1 WebHDFS takes the cluster-wide HTTP (SPNEGO)
    // authentication filter; without it a request without a delegation
    // token gets "user not authenticated by filter".
    conf.set("hadoop.http.filter.initializers", "org.apache.hadoop.security.AuthenticationFilterInitializer");
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.kerberos.principal", http);
    conf.set("hadoop.http.authentication.kerberos.keytab", keytab);
    conf.setBoolean("hadoop.http.authentication.simple.anonymous.allowed", false);
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.set("dfs.data.transfer.protection", "authentication");
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    // Delegation tokens: a short renew interval lets tests see renewal
    // matter (minihdfs.token.renew.interval.ms; Hadoop's default is a day).
    conf.setLong("dfs.namenode.delegation.token.renew-interval",
        Long.getLong("minihdfs.token.renew.interval.ms", 24L * 3600 * 1000));
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(service, keytab);
  }

  private static void deleteTree(Path p) {
    try (Stream<Path> s = Files.walk(p)) {
      s.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
    } catch (IOException e) {
      System.err.println("minihdfs: removing " + p + ": " + e);
    }
  }
}
