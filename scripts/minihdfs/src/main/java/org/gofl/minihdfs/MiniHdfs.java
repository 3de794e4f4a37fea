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

/**
 * Starts a one-DataNode MiniDFSCluster in the foreground for gofl's storage
 * tests: the NameNode RPC at hdfs://127.0.0.1:PORT and WebHDFS on the HTTP
 * port. Prints a line starting with "MINIHDFS READY" once the cluster is up,
 * and shuts it down (removing its data) on SIGTERM or SIGINT.
 *
 * <p>System properties: minihdfs.port (9000), minihdfs.http.port (9870),
 * minihdfs.dir (a fresh temporary directory; removed on exit).
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

    long start = System.nanoTime();
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(port)
        .nameNodeHttpPort(httpPort)
        .numDataNodes(1)
        .format(true)
        .manageNameDfsDirs(true)
        .build();
    cluster.waitActive();
    cluster.waitClusterUp();

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

    System.out.printf("MINIHDFS READY hdfs://127.0.0.1:%d webhdfs=http://127.0.0.1:%d dir=%s (%.1fs)%n",
        port, httpPort, base, (System.nanoTime() - start) / 1e9);
    System.out.flush();
    stopped.await();
  }

  private static void deleteTree(Path p) {
    try (Stream<Path> s = Files.walk(p)) {
      s.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
    } catch (IOException e) {
      System.err.println("minihdfs: removing " + p + ": " + e);
    }
  }
}
