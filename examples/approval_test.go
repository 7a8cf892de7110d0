package examples_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestApproval runs approval.yaml: a small expense passes at once; a large
// one parks durably until the manager's signal, then sees the previous
// decision kept in the employee's session variable.
func TestApproval(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	small := h.run(t, "approval.yaml", map[string]any{"employee": "ann", "amount": 20})
	h.wantStatus(t, small, starflowtype.RunSucceeded)
	out := outputOf(t, small)
	wantEq(t, "decision", out["decision"], "auto-approved")
	wantEq(t, "previous", out["previous"], "none")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := os.ReadFile("approval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def, err := h.eng.Apply(ctx, "approval.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.eng.Enqueue(ctx, def.Name, map[string]any{"employee": "ann", "amount": 120.5}, &starflow.EnqueueOptions{Revision: def.Revision})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := h.store.GetRun(ctx, &state.GetRunParams{ID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked {
			if r.LeasedBy != "" {
				t.Fatalf("a parked run holds a lease: %q", r.LeasedBy)
			}
			break
		}
		if r.Status.Terminal() || ctx.Err() != nil {
			t.Fatalf("the run did not park at the approval: %s %q", r.Status, r.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.eng.Signal(ctx, run.ID, "expense_decision", json.RawMessage(`{"approved": true, "comment": "fine"}`)); err != nil {
		t.Fatal(err)
	}
	final, err := h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.wantStatus(t, final, starflowtype.RunSucceeded)
	out = outputOf(t, final)
	wantEq(t, "decision", out["decision"], "approved")
	prev, _ := json.Marshal(out["previous"])
	wantEq(t, "previous", string(prev), `{"amount":20,"decision":"auto-approved"}`)
}
