package storage

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/storage/storagetest"
)

// The renewer renews at TimeRatio of the time to expiry, rewrites the
// file, replaces a token that stops being extended, and retries after the
// backoff when neither works.
func TestDelegationTokenRenewerSchedule(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	file := filepath.Join(t.TempDir(), "tokens.json")
	tok := DelegationToken{NameNode: "nn:8020", WebHDFS: "nn:9870", Token: "t1", Renewer: "gofl", Expires: start.Add(100 * time.Minute)}
	if err := WriteDelegationTokens(file, []DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	type call struct {
		op, token string
		at        time.Time
	}
	var mu sync.Mutex
	var calls []call
	calls1 := make(chan call, 16)
	maxLife := start.Add(200 * time.Minute)
	obtainFails := true
	r := &DelegationTokenRenewer{
		File: file, TimeRatio: 0.5, RetryBackoff: 10 * time.Minute, Clock: clk, Log: zerolog.Nop(),
		renew: func(_ context.Context, t DelegationToken, _ Options) (time.Time, error) {
			now := clk.Now()
			calls1 <- call{"renew", t.Token, now}
			if t.Token == "t1" {
				return minTime(now.Add(100*time.Minute), maxLife), nil
			}
			return time.Time{}, errors.New("cancelled")
		},
		obtain: func(_ context.Context, uri string, _ Options, renewer string) (DelegationToken, error) {
			now := clk.Now()
			calls1 <- call{"obtain", uri, now}
			mu.Lock()
			defer mu.Unlock()
			if obtainFails {
				obtainFails = false
				return DelegationToken{}, errors.New("KDC down")
			}
			return DelegationToken{NameNode: "nn:8020", Token: "t2", Renewer: renewer, Expires: now.Add(100 * time.Minute)}, nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	}()
	// step advances the fake clock to its next timer once Run has armed it.
	step := func() call {
		t.Helper()
		stepArmed(t, clk)
		select {
		case c := <-calls1:
			t.Logf("call %s %s at +%v", c.op, c.token, c.at.Sub(start))
			calls = append(calls, c)
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no call after the timer fired")
		}
		return call{}
	}
	want := func(c call, op, tok string, at time.Duration) {
		t.Helper()
		if c.op != op || c.token != tok || !c.at.Equal(start.Add(at)) {
			t.Fatalf("call %+v, want %s %s at +%v", c, op, tok, at)
		}
	}
	// waitFile waits until the file's one token satisfies ok.
	waitFile := func(what string, ok func(DelegationToken) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ts, _ := ReadDelegationTokens(file)
			if len(ts) == 1 && ok(ts[0]) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("file: %v, want %s", ts, what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	want(step(), "renew", "t1", 50*time.Minute) // half of 100 min
	waitFile("expiry +150m", func(d DelegationToken) bool { return d.Expires.Equal(start.Add(150 * time.Minute)) })
	want(step(), "renew", "t1", 100*time.Minute) // half of the 100 min left; capped at +200m
	want(step(), "renew", "t1", 150*time.Minute) // not extended any more
	want(<-calls1, "obtain", "hdfs://nn:8020", 150*time.Minute)
	want(step(), "renew", "t1", 160*time.Minute) // the first obtain failed: after the 10 min backoff
	want(<-calls1, "obtain", "hdfs://nn:8020", 160*time.Minute)
	waitFile("the new token", func(d DelegationToken) bool { return d.Token == "t2" })
}

// stepArmed advances the fake clock to its next timer once the renewer
// has armed one.
func stepArmed(t *testing.T, clk *clock.Fake) {
	t.Helper()
	waitArmed(t, clk, 30*time.Second)
	clk.Step()
}

// waitArmed waits until the renewer has armed a timer.
func waitArmed(t *testing.T, clk *clock.Fake, within time.Duration) {
	t.Helper()
	select {
	case <-clk.Armed():
	case <-time.After(within):
		t.Fatal("the renewer armed no timer")
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Against the Kerberized NameNode: a renewal round extends the token in
// the file.
func TestDelegationTokenRenewerOnHDFS(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	ctx := testCtx(t)
	opts := kerberosOptions(k, k.Keytab)
	tok, file := obtainTokenFile(t, k)
	clk := clock.NewFake(time.Now())
	r := &DelegationTokenRenewer{File: file, Options: opts, Clock: clk, Log: zerolog.Nop()}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(time.Minute)
	waitArmed(t, clk, time.Minute)
	// The NameNode's clock is real: renewing at once extends the expiry
	// by the time since the token was obtained.
	time.Sleep(1100 * time.Millisecond) //nolint:gosleep // the NameNode's real clock must move for the expiry to grow
	clk.Step()
	for {
		ts, err := ReadDelegationTokens(file)
		if err == nil && len(ts) == 1 && ts[0].Expires.After(tok.Expires) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token not renewed in the file: %v, %v (was %v)", ts, err, tok.Expires)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With NoReplace (a job's tokens) a token past renewal is kept and tried
// again after the backoff, never replaced by one of the renewer's own;
// OnChange sees every rewrite of the file.
func TestDelegationTokenRenewerNoReplace(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	file := filepath.Join(t.TempDir(), "tokens.json")
	tok := DelegationToken{NameNode: "nn:8020", Token: "job", Renewer: "gofl", Expires: start.Add(100 * time.Minute)}
	if err := WriteDelegationTokens(file, []DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	renewals := make(chan time.Time, 16)
	changes := make(chan []DelegationToken, 16)
	extend := true
	r := &DelegationTokenRenewer{
		File: file, TimeRatio: 0.5, RetryBackoff: 10 * time.Minute, Clock: clk, Log: zerolog.Nop(), NoReplace: true,
		OnChange: func(_ context.Context, ts []DelegationToken) { changes <- ts },
		renew: func(_ context.Context, t DelegationToken, _ Options) (time.Time, error) {
			renewals <- clk.Now()
			if extend {
				extend = false
				return clk.Now().Add(100 * time.Minute), nil
			}
			return time.Time{}, errors.New("cancelled")
		},
		obtain: func(context.Context, string, Options, string) (DelegationToken, error) {
			t.Error("a job's token was replaced")
			return DelegationToken{}, errors.New("no")
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	step := func() time.Time {
		t.Helper()
		stepArmed(t, clk)
		select {
		case at := <-renewals:
			return at
		case <-time.After(30 * time.Second):
			t.Fatal("no renewal after the timer fired")
		}
		return time.Time{}
	}
	if at := step(); !at.Equal(start.Add(50 * time.Minute)) {
		t.Fatalf("first renewal at %v", at.Sub(start))
	}
	select {
	case ts := <-changes:
		if len(ts) != 1 || ts[0].Token != "job" || !ts[0].Expires.Equal(start.Add(150*time.Minute)) {
			t.Fatalf("OnChange got %v", ts)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnChange not called after the renewal")
	}
	if at := step(); !at.Equal(start.Add(100 * time.Minute)) { // half of the 100 min left
		t.Fatalf("second renewal at %v", at.Sub(start))
	}
	if at := step(); !at.Equal(start.Add(110 * time.Minute)) { // after the backoff, same token
		t.Fatalf("retry at %v", at.Sub(start))
	}
	if ts, _ := ReadDelegationTokens(file); len(ts) != 1 || ts[0].Token != "job" {
		t.Fatalf("file: %v", ts)
	}
}

func TestJobTokenHelpers(t *testing.T) {
	a := DelegationToken{NameNode: "nn1:8020", Token: "user1"}
	b := DelegationToken{NameNode: "nn1:8020", Token: "cluster1"}
	c := DelegationToken{NameNode: "nn2:8020", Token: "cluster2"}
	got := MergeDelegationTokens([]DelegationToken{a}, []DelegationToken{b, c})
	if len(got) != 2 || got[0].Token != "user1" || got[1].Token != "cluster2" {
		t.Errorf("MergeDelegationTokens = %v", got)
	}
	for in, want := range map[string]string{"gofl": "gofl", "gofl@R": "gofl", "hdfs/host@R": "hdfs"} {
		if got := ShortName(in); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", in, got, want)
		}
	}
	dir := t.TempDir()
	uri, ok, err := LocalClusterFileURI(dir, "c1", DelegationTokensFile)
	if err != nil || !ok || uri != "file://"+dir+"/.gofl/c1/"+DelegationTokensFile {
		t.Fatalf("LocalClusterFileURI = %q %v %v", uri, ok, err)
	}
	if _, ok, err := LocalClusterFileURI("hdfs://nn:8020/staging", "c1", DelegationTokensFile); ok || err != nil {
		t.Errorf("LocalClusterFileURI on hdfs:// = %v %v, want not ok", ok, err)
	}
	if _, _, err := LocalClusterFileURI(dir, "../x", DelegationTokensFile); err == nil {
		t.Error("LocalClusterFileURI took a bad cluster ID")
	}
	st := NewStaging(Local(), dir)
	if err := st.PutDelegationTokens(context.Background(), "c1", []DelegationToken{a}); err != nil {
		t.Fatal(err)
	}
	// TaskManagers on nomad read the staged file by its file:// URI.
	if ts, err := ReadDelegationTokens(uri); err != nil || len(ts) != 1 || ts[0].Token != "user1" {
		t.Errorf("ReadDelegationTokens(%s) = %v, %v", uri, ts, err)
	}
	if _, err := ReadDelegationTokens("hdfs://nn:8020" + dir + "/.gofl/c1/" + DelegationTokensFile); !errors.Is(err, ErrInvalid) {
		t.Errorf("ReadDelegationTokens of hdfs:// = %v, want ErrInvalid", err)
	}
}
