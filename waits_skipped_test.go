package starflow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

const skippedBeforeWaitDef = `name: skipwait
steps:
  - id: small
    when: "${{ input.amount < 10 }}"
    context_set: {small: true}
  - id: approve
    wait: {signal: go}
  - id: after
    context_set: {done: true}
output: "${{ variables }}"
`

// A step skipped before a durable wait is recorded once: the run continued
// after the wake re-evaluates its when (false again), and the store writes
// no second node_skipped event.
func TestWaitSkippedStepBeforeWaitRecordedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(skippedBeforeWaitDef)
	run := h.enqueue("skipwait", map[string]any{"amount": 99})
	awaitParked(t, h, run.ID)
	if n := countEvents(h.events(run.ID), starflowtype.EventNodeSkipped, "small"); n != 1 {
		t.Fatalf("node_skipped for small before the wake: %d, want 1", n)
	}
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	evs := h.events(run.ID)
	if n := countEvents(evs, starflowtype.EventRunResumed, ""); n != 1 {
		t.Fatalf("run_resumed events: %d, want 1 (%v)", n, eventTypes(evs))
	}
	if n := countEvents(evs, starflowtype.EventNodeSkipped, "small"); n != 1 {
		t.Errorf("node_skipped for small: %d, want 1 (%v)", n, eventTypes(evs))
	}
	if st := stepByID(h.steps(run.ID), "small"); st == nil || st.Status != starflowtype.StepSkipped {
		t.Errorf("small step row: %+v", st)
	}
	if out := jsonOf(t, end.Output); out["small"] != nil || out["done"] != true {
		t.Errorf("output: %s", end.Output)
	}
}
