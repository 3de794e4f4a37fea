// Package ha provides gofl's high-availability services (Flink's
// HighAvailabilityServices) behind one interface, Services, selected with
// high-availability.type:
//
//   - none: today's behaviour. Every contender leads at once with
//     DefaultLeaderID (the zero UUID), retrieval reports fixed addresses
//     (or those confirmed in the same process), and the stores live in
//     memory: nothing survives the JobManager.
//   - zookeeper: leader election and retrieval through ZooKeeper, recovery
//     state in high-availability.storageDir with pointers in ZooKeeper.
//
// # Model (zookeeper)
//
// A process opens one ZooKeeper session (New) and shares it. Election is
// per process, as Flink's DefaultLeaderElectionService: while the process
// has contenders (Dispatcher, ResourceManager, JobMasters), it holds an
// ephemeral sequential node under <root>/<cluster-id>/leader/latch; the
// lowest node leads. Every grant generates a new leader SessionID, given to
// all contenders of the process: it is the fencing token RPCs carry. A
// leader is revoked as soon as its connection is suspended or its session
// expires (no tolerate-suspended mode), and when it closes. A killed
// leader's latch node lives until its session times out, which bounds the
// time to fail over (high-availability.zookeeper.client.session-timeout).
//
// A leader publishes (address, session id) per component in the ephemeral
// node <root>/<cluster-id>/leader/<component>/connection_info;
// LeaderRetriever watches it and reports every change, and "no leader"
// while it is absent or this process's own connection is suspended.
//
// # Fencing
//
// Every store write takes the writer's SessionID. It fails with
// ErrNotLeader unless that is this process's current grant, and the
// ZooKeeper write is a multi-op that also checks that the process's latch
// node still exists: the latch only vanishes with the session, and no node
// can sort before a leader's later, so a deposed leader's write fails even
// before it has noticed.
//
// # Layout
//
//	ZooKeeper <root>/<cluster-id>/
//	  leader/latch/_c_<guid>-latch-<seq>   ephemeral, one per JobManager process
//	  leader/<component>/connection_info  ephemeral JSON {address, sessionId}
//	  jobgraphs/<job-id>                  path of the graph file in storageDir
//	  checkpoints/<job-id>/<19-digit id>  JSON {id, location of _metadata}
//	  checkpoint-id-counter/<job-id>      next checkpoint id, decimal
//	storageDir/<cluster-id>/
//	  jobgraphs/<job-id>-<random>         JobGraph bytes
//	  job-result-store/<job-id>_DIRTY.json, <job-id>.json
//	  blob/<key>                          job binaries and other blobs
//
// Checkpoint data and _metadata stay under state.checkpoints.dir; the
// completed-checkpoint store holds only their locations.
//
// Goroutines: the services own one goroutine for session events and one
// for the election; every LeaderElection and LeaderRetriever owns one
// goroutine that calls its contender or listener in order. Close ends them
// all.
package ha
