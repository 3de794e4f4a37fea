package runner

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MaxAccumulatorBytes bounds the accumulator results one task may report
// with its FINISHED state: they travel in one message from the runner
// through the TaskManager to the JobMaster, and collect sinks are meant
// for small results (Flink's collect-sink.batch-size.max is 2 MiB too).
const MaxAccumulatorBytes = 2 << 20

// ErrAccumulatorsTooLarge is the failure of a task whose accumulator
// results exceed MaxAccumulatorBytes.
var ErrAccumulatorsTooLarge = errors.New("runner: accumulator results too large")

// CheckAccumulators fails with ErrAccumulatorsTooLarge, naming the largest
// accumulators, when the results exceed MaxAccumulatorBytes. The runner
// checks before it reports, the TaskManager again before it relays.
func CheckAccumulators(acc map[string][]byte) error {
	total := 0
	for name, v := range acc {
		total += len(name) + len(v)
	}
	if total <= MaxAccumulatorBytes {
		return nil
	}
	names := make([]string, 0, len(acc))
	for name := range acc {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return len(acc[names[i]]) > len(acc[names[j]]) })
	var parts []string
	for _, n := range names[:min(len(names), 3)] {
		parts = append(parts, fmt.Sprintf("%s: %d bytes", n, len(acc[n])))
	}
	return fmt.Errorf("%w: %d bytes (%s) exceed the %d bytes a task may return to the client; write large results with a file sink instead of Collect",
		ErrAccumulatorsTooLarge, total, strings.Join(parts, ", "), MaxAccumulatorBytes)
}
