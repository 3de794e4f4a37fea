package ha

import (
	"context"
	"fmt"
)

// RetrieveLeader waits until component has a leader and returns it: the
// one-shot form of LeaderRetriever for the CLI and REST clients. It blocks
// until a leader is known or ctx ends (then the error names the component
// and wraps ctx's error).
func RetrieveLeader(ctx context.Context, s Services, component string) (LeaderInformation, error) {
	found := make(chan LeaderInformation, 1)
	r, err := s.LeaderRetriever(component, listenerFunc(func(info LeaderInformation) {
		if !info.IsEmpty() {
			select {
			case found <- info:
			default:
			}
		}
	}))
	if err != nil {
		return LeaderInformation{}, err
	}
	defer r.Close()
	select {
	case info := <-found:
		return info, nil
	case <-ctx.Done():
		return LeaderInformation{}, fmt.Errorf("ha: no leader of %s: %w", component, ctx.Err())
	}
}

// listenerFunc adapts a function to LeaderRetrievalListener; errors are
// dropped (RetrieveLeader ends with ctx anyway).
type listenerFunc func(LeaderInformation)

func (f listenerFunc) NotifyLeaderAddress(info LeaderInformation) { f(info) }
func (f listenerFunc) HandleError(error)                          {}
