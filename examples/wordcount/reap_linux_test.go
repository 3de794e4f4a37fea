package main

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this test process adopt its orphaned descendants,
// so that a cluster process the gofl client left running (it waits only so
// long for its cluster to go) is still waited for, and its CPU counted.
func becomeSubreaper(b *testing.B) {
	b.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
}

// reapAdopted waits for every adopted descendant to exit, up to limit, and
// returns their CPU time (user+sys) and how many there were. The benchmark
// starts no other children while it runs.
func reapAdopted(b *testing.B, limit time.Duration) (cpu time.Duration, n int) {
	b.Helper()
	type reaped struct {
		cpu time.Duration
		err error
	}
	ch := make(chan reaped)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			var ru unix.Rusage
			var ws unix.WaitStatus
			_, err := unix.Wait4(-1, &ws, 0, &ru)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			select {
			case ch <- reaped{time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		select {
		case r := <-ch:
			if errors.Is(r.err, unix.ECHILD) {
				return cpu, n
			}
			if r.err != nil {
				b.Fatalf("wait4: %v", r.err)
			}
			cpu, n = cpu+r.cpu, n+1
		case <-timeout.C:
			b.Fatalf("cluster processes still running %v after the gofl client exited", limit)
		}
	}
}
