// Package gcfloor keeps the Go heap goal above a floor. A process whose
// live heap is small but which allocates fast (a batch job's runner: every
// input line a short-lived string) otherwise collects every few megabytes
// at the default GC percent, and each cycle costs a mark of the live heap,
// two stop-the-world pauses and write barriers on every pointer store while
// it marks. With a floor of F bytes it collects about every F bytes of
// allocation instead, for at most F bytes more heap; a live heap past F/2
// is paced by the GC percent as before.
package gcfloor
