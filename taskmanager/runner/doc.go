// Package runner runs a job's tasks in a child process: the user's job
// binary started in runner role, one per job per TaskManager, so jobs are
// isolated from each other and from the TaskManager (a crashing job cannot
// take the TaskManager down, and nothing leaks between jobs as class loaders
// do in Flink).
//
// The TaskManager side (Pool, Process) starts the binary with
// GOFL_ROLE=runner and GOFL_RUNNER_SOCKET set, waits for its Unix socket
// (the runner writes to the pipe GOFL_RUNNER_READY_FD once it listens; an
// older runner's socket file is polled for), checks the protocol version in a handshake, forwards deployments and
// cancellations, and receives every task state transition on one stream.
// The runner heartbeats on another; a runner silent for the TaskManager's
// heartbeat timeout (stopped, frozen) is killed.
// The runner side (Serve) is what the SDK's runner role, or any other
// runner, calls with an Executor that runs the tasks.
package runner
