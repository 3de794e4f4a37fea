// Package nomad is gofl's Nomad resource provider (Nomad stands in for
// YARN): a cluster's JobManager and each of its TaskManagers run as Nomad
// jobs, submitted through github.com/hashicorp/nomad/api. Linking the
// package registers it as "nomad" (providers.Register) and registers its
// configuration keys with package conf.
//
// # Jobs
//
//	gofl-<cluster-id>-jobmanager       the JobManager: a service job (session) or a batch job (per-job, application)
//	gofl-<cluster-id>-taskmanager-<n>  one TaskManager: a service job, so each can be released on its own
//
// Every job has one group with one task (raw_exec or exec) running
// `gofl jobmanager` or `gofl taskmanager` with -D flags, dynamic ports
// "rpc" (and "rest" for the JobManager) passed as
// -D jobmanager.rpc.port=${NOMAD_PORT_rpc} etc. (Nomad interpolates task
// arguments), GOFL_CLUSTER_ID in the environment, and meta gofl.cluster-id,
// gofl.role, gofl.mode, gofl.worker-id, gofl.created. Tasks never
// reschedule (attempts 0), and only a JobManager restarts: in place, same
// allocation and ports, provider.nomad.jobmanager.attempts - 1 times (mode
// fail; its job's meta gofl.jobmanager-attempts, the provider's attempt
// counter the task's restarts + 1). Otherwise, when a process ends, its
// allocation ends and the provider reports it, the same on a real Nomad
// and on the test agent. Stopping sends SIGTERM, then SIGKILL after
// provider.nomad.kill-timeout. Nomad is the only record: Retrieve, List
// and Kill work from any client.
//
// The gofl binary is either pre-installed on the nodes
// (provider.nomad.binary.path, or deployment.binary, or the running
// executable's path) or fetched by an artifact stanza from an http(s) URL
// with a sha256 checksum (provider.nomad.binary.url and .sha256; HDFS files
// through WebHDFS `...?op=OPEN`, since Nomad's getter has no hdfs scheme),
// into local/gofl, started through `/bin/sh -c 'chmod +x "$0" && exec "$0" "$@"'`.
//
// # Client half (Deployer)
//
// Deploy registers the JobManager job (EnforceRegister: a live cluster ID
// fails with providers.ErrClusterExists; an ended one is purged first),
// waits for the evaluation (FailedTGAllocs become an ErrPlacement error
// naming the exhausted dimension or filtering constraint), watches the
// job's allocations with blocking queries until the task runs, reads the
// REST address from the allocation's ports and polls GET /overview. Task
// failures during startup (artifact download, checksum, driver, exit) fail
// it with ErrTaskFailed. On any error it purges the cluster's jobs and
// waits for their allocations to stop. The JobManager runs with
// deployment.provider=nomad and the client's provider.nomad.* options
// (the ACL token goes to its environment as NOMAD_TOKEN, never on its
// command line), so its ResourceManager starts TaskManagers through this
// package's WorkerDriver; ClusterSpec.TaskManagers becomes
// slotmanager.number-of-slots.min. Kill purges the JobManager job, then
// every TaskManager job with the cluster's meta, and waits until their
// allocations stopped. List purges clusters whose JobManager ended.
//
// # JobManager half (WorkerDriver)
//
// RequestWorker registers gofl-<cluster-id>-taskmanager-<n> with
// -D taskmanager.resource-id=taskmanager-<n>, the slots and the
// JobManager's RPC address, waits for its evaluation (a placement failure
// purges the job and returns an error) and returns. A goroutine per worker
// watches the job's allocations with blocking queries (feeding
// X-Nomad-Index back): WorkerStarted when the task runs, WorkerTerminated
// exactly once when the allocation is complete, failed or lost, or the job
// is gone (then the job is purged). ReleaseWorker purges the job. Close
// purges every worker's job and waits. TaskManager jobs left by an
// earlier JobManager of the same cluster are purged on Start.
//
// # Bind rule
//
// JobManagers and TaskManagers listen on the allocation's routable address
// (NOMAD_IP_*), so Deploy and NewWorkerDriver refuse (ErrInsecureBind)
// unless security.ssl.internal.enabled is on (the client turns it on by
// default and stages a per-cluster CA) or security.insecure overrides the
// rule, as Nomad's tls { verify_https_client } does for its own ports.
//
// # Configuration
//
// provider.nomad.address ($NOMAD_ADDR, http://127.0.0.1:4646),
// .namespace, .region, .datacenters (comma-separated, default *),
// .token ($NOMAD_TOKEN), .tls.ca-cert/.tls.client-cert/.tls.client-key/
// .tls.insecure, .jobmanager.cpu (MHz, 500)/.jobmanager.memory (512m),
// .taskmanager.cpu (1000)/.taskmanager.memory (1g), .cpu.mhz-per-core
// (1000, for WorkerSpec.CPU), .constraints ("attr.kernel.name = linux;
// ..."), .jobmanager.constraints and .taskmanager.constraints (one role's
// jobs only: JobManager and TaskManagers on different node classes),
// .node-pool ("all" spans every pool), .driver (raw_exec|exec),
// .binary.path, .binary.url, .binary.sha256, .kill-timeout (10s).
//
// Errors wrap ErrUnreachable (naming the address; connections time out
// after 5 s, calls after 30 s), ErrPermissionDenied (403 from Nomad's
// ACLs), ErrPlacement and ErrTaskFailed. A JobManager that fails during
// startup is reported with the last line of its stderr (read through the
// client fs API), and a hint when it could not find what file:// staging
// holds: that storage is the client machine's, which another node (or an
// exec task's own root) does not see.
package nomad
