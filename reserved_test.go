package starflow_test

import (
	"context"
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

// TestReservedKeyInWakePayloadFailsTheWait: a signal's payload becomes the
// wait step's output; one holding a __celestial key fails the step (and
// the run) instead of being checkpointed.
func TestReservedKeyInWakePayloadFailsTheWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: payload
steps:
  - id: w
    wait: {signal: go}
`)
	run := h.enqueue("payload", nil)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", []byte(`{"a": {"__celestialBlob": "x", "size_bytes": 1}}`)); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunFailed || !strings.Contains(end.Error, `output holds the reserved key "__celestialBlob" at a`) {
		t.Fatalf("run %s: %q", end.Status, end.Error)
	}
	if cps := h.checkpoints(run.ID); len(cps) != 0 {
		t.Fatalf("%d checkpoints written for a refused payload", len(cps))
	}
}
