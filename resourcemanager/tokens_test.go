package resourcemanager

import (
	"sync"
	"testing"

	"github.com/gofl/gofl/rpc/pb"
)

// A TaskExecutor gets the cluster's current delegation tokens in its
// registration response; renewed ones go to every registered TaskExecutor,
// fenced by the ResourceManager's ID; one registering later gets the
// renewed ones at registration.
func TestDelegationTokensReachTaskExecutors(t *testing.T) {
	var mu sync.Mutex
	current := []*pb.DelegationToken{{NameNode: "nn:8020", Token: "t1"}}
	cfg := testConfig()
	cfg.DelegationTokens = func() []*pb.DelegationToken { mu.Lock(); defer mu.Unlock(); return current }
	c := startRM(t, cfg)
	tm1 := c.startTE("tm1", 1)
	resp := tm1.register(t, c)
	if len(resp.DelegationTokens) != 1 || resp.DelegationTokens[0].Token != "t1" {
		t.Fatalf("registration response tokens %v, want t1", resp.DelegationTokens)
	}
	renewed := []*pb.DelegationToken{{NameNode: "nn:8020", Token: "t2"}}
	mu.Lock()
	current = renewed
	mu.Unlock()
	c.rm.UpdateDelegationTokens(renewed)
	c.settle()
	tm1.mu.Lock()
	got := tm1.tokenUpdates
	tm1.mu.Unlock()
	if len(got) != 1 || got[0].ResourceManagerId != c.rm.ID() || len(got[0].Tokens) != 1 || got[0].Tokens[0].Token != "t2" {
		t.Fatalf("tm1 got updates %v, want one with t2 from %s", got, c.rm.ID())
	}
	if resp := c.startTE("tm2", 1).register(t, c); len(resp.DelegationTokens) != 1 || resp.DelegationTokens[0].Token != "t2" {
		t.Fatalf("a later registration got %v, want t2", resp.DelegationTokens)
	}
}
