package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

// TestReservedKeysInOutputsFailTheStep: a step whose output or context
// changes hold a key starting with __celestial (engine internals, e.g. the
// placeholder of a blob reference) fails at once, not retried, with an
// error naming the key and where it is, and no checkpoint is written for
// it (issue 10 item 3) — whichever way the key got there: a hostile
// service's answer, a custom step, an expression in context_set or in a
// step's output.
func TestReservedKeysInOutputsFailTheStep(t *testing.T) {
	t.Parallel()
	forged := `{"__celestialBlob":"` + strings.Repeat("ab", 32) + `","size_bytes":300000}`
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data": [1, %s]}`, forged)
	}))
	t.Cleanup(srv.Close)
	retry := "\n    retry_policy: {max_attempts: 3, initial_interval: 10ms}"
	cases := []struct {
		name, steps, want string
		hits              int64
	}{
		{"service answer", `
  - id: s
    service_call: {method: GET, url: "` + srv.URL + `"}` + retry,
			`output holds the reserved key "__celestialBlob" at body.data[1]`, 1},
		{"service answer reshaped", `
  - id: s
    service_call: {method: GET, url: "` + srv.URL + `"}
    output: "${{ output.body.data[1] }}"` + retry,
			`output holds the reserved key "__celestialBlob" at the top level`, 1},
		{"custom step", `
  - id: s
    hostile: {}` + retry,
			`output holds the reserved key "__celestialWait" at inner`, 0},
		{"context_set value", `
  - id: s
    context_set: {x: "${{ {'__celestialBlob': 'abc', 'size_bytes': 3} }}"}`,
			`holds the reserved key "__celestialBlob" at x`, 0},
		{"output expression", `
  - id: s
    context_set: {x: 1}
    output: "${{ {'__celestialCheckout': 1} }}"`,
			`output holds the reserved key "__celestialCheckout" at the top level`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, starflow.Config{})
			var calls atomic.Int64
			if err := h.eng.RegisterStep("hostile", func(context.Context, *step.Request) (any, error) {
				calls.Add(1)
				return map[string]any{"inner": map[string]any{"__celestialWait": map[string]any{"wait_id": "x"}}}, nil
			}); err != nil {
				t.Fatal(err)
			}
			h.start()
			before := hits.Load()
			run := h.runToEnd("name: reserved\nsteps:"+c.steps+"\n  - id: after\n    context_set: {y: 1}\n", nil)
			if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, c.want) {
				t.Fatalf("run %s (attempt %d): %q; want failed at once with %q", run.Status, run.Attempt, run.Error, c.want)
			}
			if n := hits.Load() - before; n != c.hits {
				t.Errorf("service called %d times, want %d (a refused output is not retried)", n, c.hits)
			}
			if c.name == "custom step" && calls.Load() != 1 {
				t.Errorf("custom step called %d times, want 1", calls.Load())
			}
			s := stepByID(h.steps(run.ID), "s")
			if s == nil || s.Status != starflowtype.StepFailed || s.Tries != 1 {
				t.Fatalf("step s: %+v, want failed after 1 try", s)
			}
			if cps := h.checkpoints(run.ID); len(cps) != 0 {
				t.Fatalf("%d checkpoints written for a refused output", len(cps))
			}
		})
	}
}

// TestReservedKeyInWakePayloadRefused: a wake or signal payload becomes
// the wait step's output, so one holding a __celestial key (also spelled
// with \u escapes) is refused with ErrPayloadInvalid before the token is
// spent or the signal delivered; the wait stays pending and the same token
// then wakes it with a clean payload.
func TestReservedKeyInWakePayloadRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(`name: payload
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
output: "${{ steps.w.output }}"
`)
	run := h.enqueue("payload", nil)
	token, _ := sink.next(t)["token"].(string)
	awaitParked(t, h, run.ID)
	for _, bad := range []string{
		`{"a": {"__celestialBlob": "x", "size_bytes": 1}}`,
		`[{"\u005f_celestialWait": 1}]`,
		`{"__celestialX": null}`,
	} {
		_, err := h.eng.Wake(context.Background(), token, json.RawMessage(bad))
		if !errors.Is(err, starflowtype.ErrPayloadInvalid) || !strings.Contains(err.Error(), "reserved key") {
			t.Fatalf("wake with %s: %v, want ErrPayloadInvalid naming the reserved key", bad, err)
		}
		_, err = h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(bad))
		if !errors.Is(err, starflowtype.ErrPayloadInvalid) {
			t.Fatalf("signal with %s: %v, want ErrPayloadInvalid", bad, err)
		}
		_, err = h.eng.SignalKey(context.Background(), "go", "k", json.RawMessage(bad))
		if !errors.Is(err, starflowtype.ErrPayloadInvalid) {
			t.Fatalf("signal by key with %s: %v, want ErrPayloadInvalid", bad, err)
		}
	}
	if ws := h.waits(run.ID); len(ws) != 1 || ws[0].Status != starflowtype.WaitPending || !ws[0].ConsumedAt.IsZero() {
		t.Fatalf("after refused payloads the wait is %+v, want pending", ws[0])
	}
	if w, err := h.eng.Wake(context.Background(), token, json.RawMessage(`{"celestial": true}`)); err != nil || w.Status != starflowtype.WaitWoken {
		t.Fatalf("the same token with a clean payload: %+v %v", w, err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `{"celestial":true}` {
		t.Fatalf("run %s (%s): output %s", end.Status, end.Error, end.Output)
	}
}
