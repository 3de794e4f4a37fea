// Package simulator runs a job through the real scheduling core against a
// simulated cluster in logical time: a ResourceManager that hands out slots
// from simulated TaskManagers, TaskManagers that run tasks for a random
// duration and report their states, and injected TaskManager failures.
//
// It is deterministic for a given seed, so it serves both as `gofl simulate`
// (the main program until the cluster runtime lands) and as a randomized
// test of the scheduler: whatever the seed, strategy and failures, a job
// with enough restart attempts must finish, and no slot or task may be used
// twice at once.
package simulator
