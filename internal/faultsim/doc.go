// Package faultsim runs gofl's real endpoints — JobMaster, ResourceManager
// and TaskExecutors, the same code as in the processes — over a simulated
// network and clock on one goroutine, so that a run is a pure function of
// its seed.
//
// The model:
//   - A Node is a process. Its endpoints build their mailboxes with the
//     node's Executor: posted turns queue per mailbox (FIFO, as in the real
//     mailbox), and the simulation picks which ready mailbox runs next at
//     random, which is how concurrency between processes is explored.
//   - Outgoing calls (mailbox.Go) travel the network: after a drawn latency
//     the call runs the receiver's real gRPC handler (through the generated
//     service descriptors, on a Conn that generated clients take), and its
//     answer comes back after another latency. A message may be lost (the
//     caller times out), duplicated (delivered again later) or late.
//     Calls that overlap in flight arrive in any order; only the outbox's
//     one-in-flight rule keeps a peer's calls in order.
//   - Time is a clock.Fake: timers fire in deadline order when no mailbox
//     has work, so heartbeat timeouts happen exactly when they would.
//   - A Node can crash (its queued turns, timers and calls are gone and
//     calls to it are refused) and restart as a new incarnation, and links
//     can be partitioned and healed.
//
// The same seed replays the same run step by step; a failing seed is
// reproduced by running it again.
package faultsim
