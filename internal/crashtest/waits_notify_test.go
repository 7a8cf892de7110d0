package crashtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNotifyRetriedUntilDelivered: the approval app answers 503 to the
// first five notify requests (more than the runner's inline tries), so
// the token reaches it only through the maintenance pass of `starflow
// dev`, which retries with backoff. Once it answers 200 the wait is marked
// notified and no further request is sent; the delivered token then wakes
// the run with `starflow wake`.
func TestNotifyRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	const refuse = 5
	var (
		mu       sync.Mutex
		requests int
		token    string
		keys     []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		defer mu.Unlock()
		requests++
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if requests <= refuse {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		token, _ = body["token"].(string)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	d := newLiteDeploy(t)
	d.apply("boundary", strings.Replace(boundaryWorkflow, "%s", srv.URL, 1))
	id := d.enqueue("boundary", map[string]any{})
	env := []string{"STARFLOW_WAKE_KEYS=k1:QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="}
	d.startProc("dev", env, "--poll-interval", "100ms")
	var tok string
	waitFor(t, 90*time.Second, "the notify to be accepted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		tok = token
		return tok != ""
	})
	waitFor(t, 30*time.Second, "notified_at recorded", func() bool {
		return d.count(`SELECT count(*) FROM workflow_waits WHERE run_id = ? AND notified_at IS NOT NULL AND notify_tries >= 1`, id) == 1
	})
	time.Sleep(2 * time.Second) // several more passes: nothing more is sent
	mu.Lock()
	sent := requests
	for _, k := range keys {
		if !strings.HasPrefix(k, "starflow-notify/") || k != keys[0] {
			t.Errorf("notify Idempotency-Key %q, want one starflow-notify/<wait id> for every try", k)
		}
	}
	mu.Unlock()
	if sent != refuse+1 {
		t.Fatalf("%d notify requests, want %d refused and 1 accepted", sent, refuse)
	}
	r := d.cliEnv(env, "wake", tok, "--payload", `{"approved": true, "point": "retried"}`)
	if r.code != 0 {
		t.Fatalf("wake with the retried token: exit %d %s", r.code, r.stderr)
	}
	if run := d.waitRunEnded(id, 60*time.Second); run.status != "succeeded" || !strings.Contains(run.output, `"retried"`) {
		t.Fatalf("run %s, output %s", run.status, run.output)
	}
}
