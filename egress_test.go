package starflow_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/egress/egresstest"
	"github.com/starflow/starflow/starflowtype"
)

// Egress policy through the engine (issue 10 item 2): a refusal fails the
// step at once, permanently, with the exact message; Config.Egress
// changes what is refused; notify requests go through the same policy.

const metadataRefused = "egress to 169.254.169.254 refused by policy"

// hitServer counts the requests it receives and records their headers.
type hitServer struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	headers []http.Header
}

func newHitServer(t *testing.T, h http.HandlerFunc) *hitServer {
	t.Helper()
	s := &hitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestServiceCallEgressRefusedFailsAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: metadata
max_attempts: 3
steps:
  - id: steal
    service_call: {url: "http://169.254.169.254/latest/meta-data/iam/security-credentials/"}
    retry_policy: {max_attempts: 5, initial_interval: 1ms}
  - id: after
    context_set: {x: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || run.DeadLettered {
		t.Fatalf("run %s attempt %d dead-lettered %v: %s", run.Status, run.Attempt, run.DeadLettered, run.Error)
	}
	if !strings.HasSuffix(run.Error, metadataRefused) {
		t.Fatalf("run error %q, want it to end with %q", run.Error, metadataRefused)
	}
	steps := h.steps(run.ID)
	call := stepByID(steps, "steal")
	if call.Status != starflowtype.StepFailed || call.Tries != 1 || call.Error != metadataRefused {
		t.Fatalf("step %s tries %d error %q", call.Status, call.Tries, call.Error)
	}
	if call.DurationMS >= 100 {
		t.Fatalf("the refused step took %d ms (budget 100 ms)", call.DurationMS)
	}
	if n := countEvents(h.events(run.ID), starflowtype.EventNodeRetry, ""); n != 0 {
		t.Fatalf("%d node_retry events for a refusal", n)
	}
}

func TestServiceCallEgressRefusalIsTypedForCatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: metadata-caught
steps:
  - id: guarded
    try:
      steps:
        - id: steal
          service_call: {url: "http://[::ffff:169.254.169.254]/"}
      catch:
        - id: seen
          context_set: {type: "${{ error.type }}", message: "${{ error.message }}"}
output: "${{ variables }}"
`, nil)
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	out := jsonOf(t, run.Output)
	if out["type"] != "egress_refused" || out["message"] != metadataRefused {
		t.Fatalf("catch saw %v", out)
	}
}

func TestEgressAllowAndDeny(t *testing.T) {
	t.Parallel()
	srv := newHitServer(t, nil)
	def := `
name: local
max_attempts: 1
steps:
  - id: call
    service_call: {url: "${{ input.url }}"}
    retry_policy: {max_attempts: 1}
`
	t.Run("deny loopback", func(t *testing.T) {
		h := newHarness(t, starflow.Config{Egress: starflow.EgressPolicy{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
		h.start()
		run := h.runToEnd(def, map[string]any{"url": srv.URL + "/x"})
		if run.Status != starflowtype.RunFailed || !strings.HasSuffix(run.Error, "egress to 127.0.0.1 refused by policy") {
			t.Fatalf("run %s: %s", run.Status, run.Error)
		}
		if n := srv.hits.Load(); n != 0 {
			t.Fatalf("the denied server got %d requests", n)
		}
	})
	t.Run("allow wins over deny", func(t *testing.T) {
		h := newHarness(t, starflow.Config{Egress: starflow.EgressPolicy{
			Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
		h.start()
		before := srv.hits.Load()
		if run := h.runToEnd(def, map[string]any{"url": srv.URL + "/x"}); run.Status != starflowtype.RunSucceeded {
			t.Fatalf("run %s: %s", run.Status, run.Error)
		}
		if srv.hits.Load() != before+1 {
			t.Fatal("the allowed server got no request")
		}
	})
	t.Run("allow link-local", func(t *testing.T) {
		// A server of the test's own on this machine's fe80:: address:
		// refused by default, reached once allow-listed.
		var hits atomic.Int64
		_, url := egresstest.LinkLocalServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			_, _ = io.WriteString(w, "ok")
		}))
		h := newHarness(t, starflow.Config{})
		h.start()
		run := h.runToEnd(def, map[string]any{"url": url + "/"})
		if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "refused by policy") {
			t.Fatalf("link-local by default: run %s: %s", run.Status, run.Error)
		}
		h = newHarness(t, starflow.Config{Egress: starflow.EgressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}}})
		h.start()
		if run := h.runToEnd(def, map[string]any{"url": url + "/"}); run.Status != starflowtype.RunSucceeded {
			t.Fatalf("allow-listed link-local: run %s: %s", run.Status, run.Error)
		}
		if n := hits.Load(); n != 1 {
			t.Fatalf("the link-local server got %d requests, want 1", n)
		}
	})
}

// TestNotifyURLRefusedBeforeWait: a wait whose notify URL the policy
// refuses fails at once, before the run parks or a token exists.
func TestNotifyURLRefusedBeforeWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: notify-metadata
steps:
  - id: approve
    wait: {signal: go, notify: {url: "http://169.254.169.254/hook"}}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.HasSuffix(run.Error, metadataRefused) {
		t.Fatalf("run %s attempt %d: %s", run.Status, run.Attempt, run.Error)
	}
	if ws := h.waits(run.ID); len(ws) != 0 {
		t.Fatalf("a wait was registered: %+v", ws[0])
	}
	if s := stepByID(h.steps(run.ID), "approve"); s.Status != starflowtype.StepFailed || s.Error != metadataRefused {
		t.Fatalf("wait step %s: %q", s.Status, s.Error)
	}
}

// TestNotifyRedirectAcrossOriginsCarriesNothing: the inline notify POST
// (its body holds the wake token) is not re-sent to another origin by a
// 307, and a 302 there carries neither the definition's headers nor
// Referer.
func TestNotifyRedirectAcrossOriginsCarriesNothing(t *testing.T) {
	t.Parallel()
	other := newHitServer(t, nil)
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusFound} {
		receiver := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/stolen", status)
		})
		h := newHarness(t, starflow.Config{})
		h.start()
		h.apply(`name: notify-redirect
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + receiver.URL + `/hook?key=query-secret", headers: {X-Hook-Secret: hook-secret-value}}}
`)
		run := h.enqueue("notify-redirect", nil)
		awaitParked(t, h, run.ID)
		ws := h.waits(run.ID)
		if len(ws) != 1 {
			t.Fatalf("%d waits", len(ws))
		}
		switch status {
		case http.StatusTemporaryRedirect:
			// Refused once, not tried three times inline.
			if receiver.hits.Load() != 1 || other.hits.Load() != 0 || ws[0].NotifyTries != 1 || !ws[0].NotifiedAt.IsZero() {
				t.Fatalf("307: receiver %d, other origin %d requests; wait %+v", receiver.hits.Load(), other.hits.Load(), ws[0])
			}
		case http.StatusFound:
			if other.hits.Load() != 1 {
				t.Fatalf("302: the other origin got %d requests", other.hits.Load())
			}
			other.mu.Lock()
			got := other.headers[0]
			other.mu.Unlock()
			for _, k := range []string{"X-Hook-Secret", "Idempotency-Key", "Referer", "Content-Type"} {
				if v := got.Get(k); v != "" {
					t.Errorf("302: the other origin got %s: %q", k, v)
				}
			}
		}
	}
}

// TestDeliverNotifyThroughPolicy: the maintenance pass's delivery
// (Engine.DeliverNotify) dials through the policy too.
func TestDeliverNotifyThroughPolicy(t *testing.T) {
	t.Parallel()
	receiver := newHitServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: notify-later
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + receiver.URL + `/hook"}}
`)
	run := h.enqueue("notify-later", nil)
	awaitParked(t, h, run.ID)
	ws := h.waits(run.ID)
	before := receiver.hits.Load()
	if len(ws) != 1 || before == 0 {
		t.Fatalf("%d waits, %d inline tries", len(ws), before)
	}
	denying, err := starflow.New(starflow.Config{Store: h.store, NoRunner: true, Logger: quietLogger(),
		Egress: starflow.EgressPolicy{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	err = denying.DeliverNotify(context.Background(), ws[0])
	if err == nil || !strings.HasSuffix(err.Error(), "egress to 127.0.0.1 refused by policy") {
		t.Fatalf("DeliverNotify: %v", err)
	}
	if n := receiver.hits.Load(); n != before {
		t.Fatalf("the denied receiver got %d more requests", n-before)
	}
	if err := h.eng.DeliverNotify(context.Background(), ws[0]); err == nil || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "refused") {
		t.Fatalf("the allowing engine's delivery: %v (want the receiver's 503)", err)
	}
	if receiver.hits.Load() != before+1 {
		t.Fatal("the allowing engine's delivery did not reach the receiver")
	}
}
