# gofl build entry points. Tools are pinned and installed under .tools/.
GO            ?= go
BIN           := bin
TOOLS         := $(CURDIR)/.tools
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS       := -X github.com/gofl/gofl/internal/version.Version=$(VERSION)

PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
STATICCHECK_VERSION        := v0.6.1

.PHONY: all build test bench bench-scheduler proto lint run tools-proto docs nomad-testagent

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/gofl ./cmd/gofl

# Starts a MiniDFSCluster, a real Nomad dev agent, a standalone ZooKeeper and
# a Kafka broker, an MIT KDC with a Kerberized MiniDFSCluster and Chromium
# (each shared by every package) for the hdfs://, real-Nomad, HA, Kafka,
# Kerberos and dashboard tests; see the scripts.
test:
	scripts/minihdfs/with-hdfs.sh scripts/minihdfs/with-hdfs-hosts.sh scripts/minihdfs/with-kerberos-hdfs.sh scripts/nomad/with-nomad.sh scripts/zookeeper/with-zk.sh scripts/kafka/with-kafka.sh scripts/chromium/with-chromium.sh $(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -count=1 -run 'NoAlloc' ./stream/...

# Every fuzz target (scripts/fuzz.sh) for FUZZTIME each (default 60s);
# CI runs them for 8s each after make test.
.PHONY: fuzz
fuzz:
	GO=$(GO) FUZZTIME=$(or $(FUZZTIME),60s) scripts/fuzz.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-scheduler:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 5x ./jobmanager/...

# Data-plane throughput: the chained operator loop of one task, word count
# through the local executor (-wordcount.mb MB of text per op) and the
# network exchange. BENCH_COUNT (default 5) runs of each, in Go's benchmark
# format: save the output and compare runs with benchstat.
# Issue 17's yardstick: the wordcount example as a per-job cluster on the
# local provider at p=2 against plainwc (plain Go, no framework; PLAINWC
# names its directory) on the same 100 MB, paired in one run: wall and CPU
# time of both and the ratios gofl/plainwc, in Go's benchmark format
# (BENCH_COUNT runs, default 3; compare with benchstat). PROFILE=DIR makes
# the job's runners write CPU and allocation profiles into DIR.
PLAINWC ?= $(abspath ../shared/bench/plainwc)
.PHONY: bench-wordcount
bench-wordcount:
	GOFL_PLAINWC=$(PLAINWC) GOFL_PROFILE_DIR=$(if $(PROFILE),$(abspath $(PROFILE))) $(GO) test -run '^$$' -bench '^BenchmarkWordcountVsPlain$$' -benchtime 1x -count $(or $(BENCH_COUNT),3) -timeout 30m ./examples/wordcount/

# Issue 17's batch join: about 2 GB of generated input (1 GB a side) joined
# on a TaskManager process with taskmanager.memory.managed.size 256m: the
# result is checked against a per-key reference, and every gofl process
# must peak under 600 MiB RSS. GOFL_BENCH_JOIN_RECORDS=N shrinks it (N
# records a side).
.PHONY: bench-join
bench-join:
	$(GO) test -run '^$$' -bench '^BenchmarkJoin2GB$$' -benchtime 1x -count 1 -timeout 90m ./jobmanager/

# Deployment latency on the local provider: gofl run to RUNNING and to
# FINISHED in per-job mode, and submitting to a running session
# (RUNS, default 5).
.PHONY: bench-deploy
bench-deploy:
	GO=$(GO) scripts/bench-deploy.sh

# The cost of metrics reporting on wordcount (issue 14's goal: < 3%):
# BenchmarkMetricsCost, PAIRS (default 10) interleaved pairs of runs on two
# clusters side by side, reporters off and on (Prometheus on every process
# scraped every second, REST vertex metrics polled every second); reports
# MB/s, records/s and CPU ms/MB of each and the cost's median, min, max and
# 95% CI over the pairs. MB (default 50) input, P (default 4) parallelism.
.PHONY: bench-metrics
bench-metrics:
	GOFL_BENCH_PAIRS=$(or $(PAIRS),10) GOFL_BENCH_WORDCOUNT_MB=$(or $(MB),50) GOFL_BENCH_METRICS_P=$(or $(P),4) $(GO) test -run '^$$' -bench '^BenchmarkMetricsCost$$' -benchtime 1x -count 1 -timeout 30m ./jobmanager/

.PHONY: bench-throughput
bench-throughput:
	$(GO) test -run '^$$' -bench '^BenchmarkChainedMapFilter$$' -benchmem -benchtime 2s -count $(or $(BENCH_COUNT),5) ./stream/
	$(GO) test -run '^$$' -bench '^BenchmarkWordcountLocal$$' -benchmem -benchtime 3x -count $(or $(BENCH_COUNT),5) ./stream/ -args -wordcount.mb=10
	$(GO) test -run '^$$' -bench '^BenchmarkExchange' -benchmem -benchtime 1s -count $(or $(BENCH_COUNT),5) ./taskmanager/network/
	$(GO) test -run '^$$' -bench '^BenchmarkWordcountEndToEnd$$' -benchtime 1x -count $(or $(BENCH_COUNT),1) ./jobmanager/

# The deterministic fault simulation (internal/faultsim) over 100,000
# seeds: the real JobMaster, ResourceManager and TaskExecutors over a lossy,
# reordering, partitioned network with crashing TaskManagers. Prints runs/s;
# a failing seed prints the command that replays it. make test runs 2,000.
# Checkpointing: throughput with checkpoints every second against none on a
# cluster of real processes (PAIRS interleaved pairs, default 6, of RECORDS
# records each, default 60,000,000), and snapshot/restore of 1 GiB of keyed state
# against dd writing and reading the same bytes.
.PHONY: bench-checkpoint
bench-checkpoint:
	GOFL_BENCH_PAIRS=$(or $(PAIRS),6) GOFL_BENCH_CHECKPOINT_RECORDS=$(or $(RECORDS),60000000) scripts/minihdfs/with-hdfs.sh $(GO) test -run '^$$' -bench 'BenchmarkCheckpoint' -benchtime 1x -count $${BENCH_COUNT:-1} -timeout 60m ./jobmanager/ ./stream/checkpointing/

# Issue 16's Kafka yardstick: kafka-counts (Kafka -> keyed count -> Kafka)
# on a cluster of real processes against a plain franz-go consume-and-produce
# loop on the same broker and records: records/s of both and the ratio
# gofl/plain (goal >= 0.7) over PAIRS alternating pairs (default 4) after a
# warm-up pair. BENCH_COUNT runs (default 2);
# GOFL_BENCH_KAFKA_RECORDS input records (default 3,000,000).
.PHONY: bench-kafka
bench-kafka:
	scripts/kafka/with-kafka.sh $(GO) test -run '^$$' -bench '^BenchmarkKafkaVsPlain$$' -benchtime $(or $(PAIRS),4)x -count $(or $(BENCH_COUNT),2) -timeout 30m ./jobmanager/

.PHONY: bench-sim
bench-sim:
	$(GO) test -count=1 -run '^TestFaultySeeds$$' -v -timeout 60m ./internal/faultsim/ -seeds $(or $(SEEDS),100000)
	$(GO) test -run '^$$' -bench '^BenchmarkClusterRun$$' -benchtime 2000x -count $(or $(BENCH_COUNT),3) ./internal/faultsim/

run: build
	$(GO) build -o $(BIN)/wordcount ./examples/wordcount
	scripts/demo.sh

# Hadoop's MiniDFSCluster in the foreground for the hdfs:// storage tests:
# NameNode at hdfs://127.0.0.1:9000, WebHDFS at 127.0.0.1:9870. Needs Java 17
# and Maven; the first run downloads Hadoop into ~/.m2.
# A real Nomad v1.6.1 dev agent in the foreground, loopback only, with
# raw_exec, at http://127.0.0.1:4646 (NOMAD_HTTP_PORT): the binary comes from
# ../shared/third_party/nomad-v1.6.1, checked against its SHA256SUMS (built
# from the source there if unusable). `export NOMAD_ADDR=http://127.0.0.1:4646`
# and the nomad provider tests run against it too.
.PHONY: nomad
nomad:
	scripts/nomad/run.sh

# A second Nomad client (node class and pool gofl-second, 127.0.0.2) joined
# to the dev agent at 127.0.0.1:4646, started first unless one answers
# there: two nodes on one machine (scripts/nomad/run-client.sh).
.PHONY: nomad-multinode
nomad-multinode:
	scripts/nomad/with-nomad.sh scripts/nomad/run-client.sh

.PHONY: minihdfs
minihdfs:
	scripts/minihdfs/run.sh

# A standalone ZooKeeper 3.9 (org.apache.zookeeper:zookeeper from Maven
# Central, run with java) in the foreground at 127.0.0.1:2181 for the HA
# tests (ha/zktest finds it there) and by hand: loopback only, admin server
# off, data in a temporary directory removed on exit. Needs Java 17 and
# Maven; the first run resolves the jars into scripts/zookeeper/target.
.PHONY: zookeeper
zookeeper:
	scripts/zookeeper/run.sh

# Apache Kafka (KRaft mode, one combined broker and controller) in the
# foreground at 127.0.0.1:9092, loopback only, with fresh storage each run.
# Needs Java 17 and Maven; the first run fetches org.apache.kafka:kafka_2.13
# into ~/.cache/gofl (see scripts/kafka). The Kafka tests use it (or
# GOFL_TEST_KAFKA=host:port).
.PHONY: kafka
kafka:
	scripts/kafka/run.sh

# An MIT KDC (Debian krb5-kdc) for realm GOFL.TEST and, with it, a
# Kerberized MiniDFSCluster (SPNEGO WebHDFS, block tokens, SASL data
# transfer) in the foreground: prints the GOFL_TEST_KDC_* and
# GOFL_TEST_HDFS_KERBEROS_* settings, stops both on Ctrl-C.
.PHONY: kdc
kdc:
	scripts/minihdfs/with-kerberos-hdfs.sh bash -c 'env | grep "^GOFL_TEST_" | sort; echo "KDC and Kerberized HDFS up; Ctrl-C stops them"; sleep infinity'

# Regenerates the configuration reference in README.md from conf/.
docs:
	$(GO) run ./cmd/gofl config docs --update-readme

# protoc comes from Debian's protobuf-compiler; the Go plugins are pinned.
tools-proto:
	@scripts/install-protoc.sh
	@test -x $(TOOLS)/protoc-gen-go || GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@test -x $(TOOLS)/protoc-gen-go-grpc || GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: tools-proto
	PATH=$(TOOLS):$$PATH protoc -I rpc \
		--go_out=rpc/pb --go_opt=paths=source_relative \
		--go-grpc_out=rpc/pb --go-grpc_opt=paths=source_relative \
		rpc/*.proto

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ -x $(TOOLS)/staticcheck ] || GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); then \
		$(TOOLS)/staticcheck ./...; else echo "staticcheck unavailable; skipped"; fi

# Runs gofl's Nomad test agent (a stand-in for `nomad agent -dev`) in the
# foreground at 127.0.0.1:4646; see providers/nomad/testagent/README.md.
nomad-testagent:
	$(GO) run ./cmd/nomad-testagent -addr 127.0.0.1:4646
