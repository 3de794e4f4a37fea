// Package mock holds ready-made fixtures for tests and benchmarks of the
// scheduling core, in the spirit of Nomad's scheduler mocks: job graphs of
// well-known shapes (Flink's two-vertex scheduler-benchmark job, a
// word count), a scheduler configuration that never restarts, TaskManagers
// with their slot offers, and small helpers that drive a Scheduler.
//
// Fixtures panic on errors that can only come from a broken fixture or a
// broken scheduler; they are meant for code that would fail anyway.
package mock
