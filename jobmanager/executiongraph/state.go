package executiongraph

import (
	"errors"
	"fmt"
)

// ExecutionState is the state of one Execution attempt, as in Flink.
type ExecutionState uint8

const (
	Created ExecutionState = iota
	Scheduled
	Deploying
	Initializing
	Running
	Finished
	Canceling
	Canceled
	Failed
)

var stateNames = [...]string{"CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED"}

func (s ExecutionState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("ExecutionState(%d)", int(s))
}

// AllStates lists every state in lifecycle order.
func AllStates() []ExecutionState {
	return []ExecutionState{Created, Scheduled, Deploying, Initializing, Running, Finished, Canceling, Canceled, Failed}
}

// ParseExecutionState is the inverse of String.
func ParseExecutionState(s string) (ExecutionState, error) {
	for i, n := range stateNames {
		if n == s {
			return ExecutionState(i), nil
		}
	}
	return 0, fmt.Errorf("executiongraph: unknown execution state %q", s)
}

// IsTerminal reports whether no further transition can leave s.
func (s ExecutionState) IsTerminal() bool { return s == Finished || s == Canceled || s == Failed }

// ErrIllegalTransition is wrapped by every rejected state change.
var ErrIllegalTransition = errors.New("executiongraph: illegal execution state transition")

// legal[from] is the set of states reachable from it in one step. A task may
// skip INITIALIZING or RUNNING in its reports (a short task can finish before
// its RUNNING report is sent), so the forward path allows skips.
var legal = [...]uint16{
	Created:      bits(Scheduled, Canceled, Failed),
	Scheduled:    bits(Deploying, Canceled, Failed),
	Deploying:    bits(Initializing, Running, Finished, Canceling, Canceled, Failed),
	Initializing: bits(Running, Finished, Canceling, Canceled, Failed),
	Running:      bits(Finished, Canceling, Canceled, Failed),
	Canceling:    bits(Canceled, Failed),
	Finished:     0,
	Canceled:     0,
	Failed:       0,
}

func bits(states ...ExecutionState) uint16 {
	var b uint16
	for _, s := range states {
		b |= 1 << s
	}
	return b
}

// CanTransition reports whether from → to is a legal single step.
func CanTransition(from, to ExecutionState) bool {
	return int(from) < len(legal) && legal[from]&(1<<to) != 0
}
