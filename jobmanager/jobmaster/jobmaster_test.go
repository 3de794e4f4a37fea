package jobmaster

import (
	"testing"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

func TestVertexStatus(t *testing.T) {
	counts := func(kv ...any) map[string]int {
		m := map[string]int{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(eg.ExecutionState).String()] = kv[i+1].(int)
		}
		return m
	}
	for _, tc := range []struct {
		tasks map[string]int
		want  eg.ExecutionState
	}{
		{counts(eg.Created, 3), eg.Created},
		{counts(eg.Scheduled, 1, eg.Created, 2), eg.Scheduled},
		{counts(eg.Running, 1, eg.Deploying, 2), eg.Running},
		{counts(eg.Finished, 3), eg.Finished},
		{counts(eg.Finished, 2, eg.Running, 1), eg.Running},
		{counts(eg.Running, 2, eg.Failed, 1), eg.Failed},
		{counts(eg.Canceling, 1, eg.Canceled, 2), eg.Canceling},
		{counts(eg.Canceled, 3), eg.Canceled},
	} {
		if got := vertexStatus(tc.tasks, 3); got != tc.want.String() {
			t.Errorf("vertexStatus(%v) = %s, want %s", tc.tasks, got, tc.want)
		}
	}
}
