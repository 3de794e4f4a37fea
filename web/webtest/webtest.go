// Package webtest drives the dashboard in a real headless Chromium for
// tests, through chromedp: it finds the browser (GOFL_CHROMIUM, else
// chromium on PATH; scripts/chromium/with-chromium.sh installs Debian's
// package and sets it), records every console message, and saves
// screenshots as test artifacts.
//
// Under CI=true a missing Chromium fails the test; elsewhere the test
// skips with a message naming the script.
package webtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds each wait for the page; it only catches hangs, so it is
// generous for a loaded 2-core machine.
const Timeout = 2 * time.Minute

// ExecPath is the Chromium to run: $GOFL_CHROMIUM, else chromium or
// chromium-browser on PATH; empty when there is none.
func ExecPath() string {
	if p := os.Getenv("GOFL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one headless Chromium with one tab. Its methods fail the test
// on error and must be called from the test's goroutine.
type Browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	// allowed are URL patterns of requests that may fail (optional
	// endpoints a page probes).
	allowed []*regexp.Regexp

	shots int
}

// New starts Chromium (headless, no sandbox, no network of its own, a fresh
// profile) and stops it when the test ends.
func New(t testing.TB) *Browser {
	t.Helper()
	path := ExecPath()
	if path == "" {
		msg := "no Chromium (set GOFL_CHROMIUM or run the tests under scripts/chromium/with-chromium.sh, which installs Debian's chromium)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so the browser tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	profile, err := os.MkdirTemp("", "gofl-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(profile),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true), chromedp.WindowSize(1400, 1000),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &Browser{t: t, ctx: ctx}
	consoleCtx, stopConsole := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		stopConsole()
		<-done
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
		// Chromium's helpers may write to the profile briefly after it ends.
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		close(done)
		t.Fatalf("starting %s: %v", path, err)
	}
	messages := chromedp.Console(consoleCtx)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// AllowFailedRequest lets requests whose URL matches pattern fail without
// failing CheckConsole: an endpoint the page probes and may not exist.
func (b *Browser) AllowFailedRequest(pattern string) {
	b.allowed = append(b.allowed, regexp.MustCompile(pattern))
}

// Navigate loads url and waits for its load event.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	b.run(chromedp.Navigate(url), "navigate to "+url)
}

// Go changes the page's location hash (a dashboard route) without a reload.
func (b *Browser) Go(hash string) {
	b.t.Helper()
	b.run(chromedp.Evaluate[chromedp.Void]("location.hash = "+quote(hash)), "go to "+hash)
}

func (b *Browser) run(a chromedp.Action[chromedp.Void], what string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, a); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page and returns its value.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// WaitFor polls the JavaScript condition until it is true, failing the test
// after Timeout with what and the page's text.
func (b *Browser) WaitFor(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if errors.Is(err, context.Canceled) || time.Now().After(deadline) {
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.body.innerText"))
			b.Screenshot("timeout")
			b.t.Fatalf("after %v waiting for %s (%s; err %v); the page says:\n%s\nconsole: %v", Timeout, what, cond, err, text, b.Messages())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitText waits until the element selected by the CSS selector sel
// contains want in its text.
func (b *Browser) WaitText(sel, want string) {
	b.t.Helper()
	b.WaitFor(fmt.Sprintf("%q in %s", want, sel),
		fmt.Sprintf("[...document.querySelectorAll(%s)].some((e) => e.textContent.includes(%s))", quote(sel), quote(want)))
}

// Count is the number of elements the CSS selector sel selects.
func (b *Browser) Count(sel string) int {
	b.t.Helper()
	return Eval[int](b, fmt.Sprintf("document.querySelectorAll(%s).length", quote(sel)))
}

// Text is the text of the first element sel selects ("" if none).
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	return Eval[string](b, fmt.Sprintf("(document.querySelector(%s) || {}).textContent || ''", quote(sel)))
}

// Screenshot saves a full-page PNG as a test artifact and returns its path:
// under $GOFL_TEST_ARTIFACTS/<test name>/ when set (kept), else in the
// test's temporary directory.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	dir := os.Getenv("GOFL_TEST_ARTIFACTS")
	if dir == "" {
		dir = b.t.TempDir()
	} else {
		dir = filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(b.t.Name()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.shots++
	p := filepath.Join(dir, fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
	return p
}

// Messages are the console messages so far.
func (b *Browser) Messages() []chromedp.ConsoleMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), b.messages...)
}

// CheckConsole fails the test on any console error or uncaught exception
// so far, but for failed requests to allowed URLs.
func (b *Browser) CheckConsole() {
	b.t.Helper()
	for _, m := range b.Messages() {
		if m.Type != chromedp.ConsoleError && !m.IsException() {
			continue
		}
		if m.Source == "network" && b.allowedURL(m.URL) {
			continue
		}
		b.t.Errorf("browser console %s (url %s:%d)", m, m.URL, m.Line)
	}
}

func (b *Browser) allowedURL(u string) bool {
	for _, re := range b.allowed {
		if re.MatchString(u) {
			return true
		}
	}
	return false
}

// quote is s as a JavaScript string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "<", `\x3c`)
	return "'" + r.Replace(s) + "'"
}
