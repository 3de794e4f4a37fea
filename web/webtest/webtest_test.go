package webtest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/web/webtest"
)

// TestConsoleIsRecorded checks what CheckConsole relies on: a
// console.error, an uncaught exception and a failed request all reach
// Messages.
func TestConsoleIsRecorded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<body><p id="p">ready</p><img src="/missing.png">
<script>console.error("an error from the page"); setTimeout(() => { null.boom }, 0)</script></body>`)
	}))
	defer srv.Close()
	b := webtest.New(t)
	b.Navigate(srv.URL + "/")
	b.WaitText("#p", "ready")
	want := map[string]bool{"an error from the page": false, "boom": false, "404": false}
	for deadline := time.Now().Add(webtest.Timeout); ; time.Sleep(50 * time.Millisecond) {
		for _, m := range b.Messages() {
			for w := range want {
				if strings.Contains(m.Text, w) && (m.Type == "error" || m.IsException()) {
					want[w] = true
				}
			}
		}
		if want["an error from the page"] && want["boom"] && want["404"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console messages %v; found %v", b.Messages(), want)
		}
	}
}
