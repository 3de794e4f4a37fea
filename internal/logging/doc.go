// Package logging builds the zerolog loggers gofl processes use.
//
// There is no global logger: main builds one with New and injects it into
// every component, which adds its own context fields (component, job ID, ...).
// That keeps tests quiet and parallel-safe, and lets a test capture exactly
// one component's output. Output is human-readable on a terminal and JSON
// otherwise, so logs that go to files or collectors stay machine-parseable.
package logging
