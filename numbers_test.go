package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// A wake payload with a number that has no finite value (1e400) is refused
// with ErrPayloadInvalid before the token is verified or consumed: the
// wait stays pending and the same token then wakes it with a valid
// payload (issue 10 item 4).
func TestWakeRefusesNonFiniteBeforeConsuming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(`name: numwake
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
output: "${{ steps.w.output }}"
`)
	run := h.enqueue("numwake", nil)
	token, _ := sink.next(t)["token"].(string)
	awaitParked(t, h, run.ID)
	for _, bad := range []string{`{"amount": 1e400}`, `-1e400`, `[1, 1` + strings.Repeat("0", 400) + `]`, `{"a": 1}}`} {
		_, err := h.eng.Wake(context.Background(), token, json.RawMessage(bad))
		if !errors.Is(err, starflowtype.ErrPayloadInvalid) {
			t.Fatalf("wake with %.40s: %v, want ErrPayloadInvalid", bad, err)
		}
		if !strings.Contains(bad, "}}") && !strings.Contains(err.Error(), "out of range") {
			t.Errorf("wake with %.40s: error %q does not say the number is out of range", bad, err)
		}
	}
	if ws := h.waits(run.ID); len(ws) != 1 || ws[0].Status != starflowtype.WaitPending || !ws[0].ConsumedAt.IsZero() {
		t.Fatalf("after refused wakes the wait is %+v, want pending", ws[0])
	}
	if w, err := h.eng.Wake(context.Background(), token, json.RawMessage(`{"amount": 1e300}`)); err != nil || w.Status != starflowtype.WaitWoken {
		t.Fatalf("the same token with a valid payload: %+v %v", w, err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `{"amount":1e+300}` {
		t.Fatalf("run %s (%s): output %s", end.Status, end.Error, end.Output)
	}
}

// Signal and SignalKey refuse a non-finite payload before anything is
// delivered or held in the inbox; Enqueue refuses a non-finite input
// before a run is created.
func TestSignalAndEnqueueRefuseNonFinite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(signalDef)
	run := h.enqueue("sig", nil)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{"ok": 1e400}`)); !errors.Is(err, starflowtype.ErrPayloadInvalid) ||
		!strings.Contains(err.Error(), "$.ok") {
		t.Fatalf("signal with 1e400: %v, want ErrPayloadInvalid naming $.ok", err)
	}
	if _, err := h.eng.SignalKey(context.Background(), "go", "k-1", json.RawMessage(`[-1e400]`)); !errors.Is(err, starflowtype.ErrPayloadInvalid) {
		t.Fatalf("signal by key with -1e400: %v, want ErrPayloadInvalid", err)
	}
	if ws := h.waits(run.ID); len(ws) != 1 || ws[0].Status != starflowtype.WaitPending {
		t.Fatalf("after a refused signal the wait is %+v, want pending", ws[0])
	}
	if res, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{"ok": true}`)); err != nil || res.Wait == nil {
		t.Fatalf("valid signal: %+v %v", res, err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}

	before, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{WorkspaceID: state.DefaultWorkspace, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []any{json.RawMessage(`{"qty": 1e400}`), []byte(`{"qty": [0, -1E309]}`)} {
		_, err := h.eng.Enqueue(context.Background(), "sig", in, nil)
		if err == nil || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), "$.qty") {
			t.Fatalf("enqueue with %s: %v, want an out-of-range error naming $.qty", in, err)
		}
	}
	after, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{WorkspaceID: state.DefaultWorkspace, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("a refused enqueue created a run: %d runs before, %d after", len(before), len(after))
	}
}

// A service_call whose JSON answer holds 1e400 fails its step at once,
// without retries (the same request would get the same answer), with an
// error naming the number; the run fails rather than carrying ±Inf.
func TestServiceCallNonFiniteAnswerFailsStep(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"price": 1e400}`)
	}))
	defer srv.Close()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: inf-answer
steps:
  - id: quote
    service_call: {url: "${{ input.url }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms}
`, map[string]any{"url": srv.URL})
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "1e400") || !strings.Contains(run.Error, "$.price") {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the service was called %d times, want 1 (not retried)", n)
	}
}
