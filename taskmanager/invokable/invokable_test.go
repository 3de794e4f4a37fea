package invokable

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gofl/gofl/failure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, ctx context.Context, name, config string, attempt int) error {
	t.Helper()
	f, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s not registered", name)
	}
	task, err := f(Env{AttemptNumber: attempt, Config: []byte(config)})
	if err != nil {
		return err
	}
	return task.Invoke(ctx)
}

func TestBuiltins(t *testing.T) {
	ctx := context.Background()
	if err := run(t, ctx, Noop, "", 0); err != nil {
		t.Errorf("noop = %v", err)
	}
	start := time.Now()
	if err := run(t, ctx, Sleep, `{"duration":"30 ms"}`, 0); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Errorf("sleep = %v after %v", err, time.Since(start))
	}
	if err := run(t, ctx, Sleep, `{"duration":20}`, 0); err != nil {
		t.Errorf("sleep with bare milliseconds = %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := run(t, cctx, Sleep, `{"duration":"1h"}`, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled sleep = %v", err)
	}
	for _, tc := range []struct {
		n, attempt int
		fails      bool
	}{{1, 0, true}, {1, 1, false}, {2, 1, true}, {0, 0, false}, {-1, 5, true}} {
		cfg := `{"duration":"1ms","failAttempts":` + string(rune('0'+max(tc.n, 0))) + `}`
		if tc.n < 0 {
			cfg = `{"failAttempts":-1}`
		}
		err := run(t, ctx, FailAfterN, cfg, tc.attempt)
		if (err != nil) != tc.fails {
			t.Errorf("fail-after-n n=%d attempt %d = %v", tc.n, tc.attempt, err)
		}
		if err != nil && failure.Classify(err) != failure.FailureRecoverable {
			t.Errorf("fail-after-n failure is %v", failure.Classify(err))
		}
	}
}

func TestBadConfigIsNonRecoverable(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"duration":"soon"}`: "duration",
		`{"durration":"1s"}`:  "unknown field",
		`{"failAttempts":-2}`: "failAttempts -2",
		`not json`:            "invalid invokable config",
	} {
		f, _ := Lookup(FailAfterN)
		_, err := f(Env{Config: []byte(cfg)})
		if err == nil || !strings.Contains(err.Error(), want) || failure.Classify(err) != failure.FailureNonRecoverable {
			t.Errorf("config %s: %v", cfg, err)
		}
	}
}

func TestRegisterRejectsDuplicates(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering noop twice did not panic")
		}
	}()
	Register(Noop, func(Env) (Task, error) { return nil, nil })
}
