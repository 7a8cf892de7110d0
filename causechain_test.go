package starflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestCauseChainBounded: down a chain of child runs that fails at its
// bottom, each parent stores the child's failure as its cause, but the
// stored errors stop growing: at most 8 causes (the nearest ones, then the
// innermost failure with all its fields), a count of those left out, and
// child messages quoted up to 2 KiB. Before, each run stored every error
// below it again (~10 MB a run at depth 476).
func TestCauseChainBounded(t *testing.T) {
	t.Parallel()
	const bottom = 40
	h := newHarness(t, starflow.Config{Limits: starflow.Limits{ChildDepth: bottom}})
	h.start()
	h.apply(`name: countdown
steps:
  - id: next
    when: "${{ input.n > 0 }}"
    workflow_call: {workflow: countdown, input: {n: "${{ input.n - 1 }}"}}
  - id: boom
    fail: {type: Bottom, message: "bottom reached", details: {at: "${{ run.id }}"}}
`)
	root := h.enqueue("countdown", map[string]any{"n": bottom})
	if end := awaitEnd(t, h, root.ID); end.Status != starflowtype.RunFailed {
		t.Fatalf("root %s: %s", end.Status, end.Error)
	}
	chain := runsOf(t, h, "countdown")
	if len(chain) != bottom+1 {
		t.Fatalf("%d runs, want %d", len(chain), bottom+1)
	}
	sizes := make([]int, len(chain))
	for d, r := range chain {
		r, err := h.store.GetRun(context.Background(), &state.GetRunParams{ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		sizes[d] = len(r.ErrorDetail)
		if len(r.Error) > 2300 {
			t.Errorf("run at depth %d: error text of %d bytes", d, len(r.Error))
		}
		if d == bottom {
			if !strings.Contains(r.Error, "bottom reached") {
				t.Errorf("bottom run's error: %q", r.Error)
			}
			continue
		}
		cs := causes(t, r.ErrorDetail)
		if want := min(bottom-d, 8); len(cs) != want {
			t.Errorf("run at depth %d: %d causes, want %d", d, len(cs), want)
		}
		inner := cs[len(cs)-1]
		details, _ := inner.Details.(map[string]any)
		if inner.Type != "Bottom" || inner.Message != "bottom reached" || inner.StepID != "boom" || details["at"] != chain[bottom].ID {
			t.Errorf("run at depth %d: innermost cause %+v", d, inner)
		}
		if bottom-d > 8 {
			above, _ := cs[len(cs)-2].Details.(map[string]any)
			if n, _ := above["causes_omitted"].(float64); int(n) != bottom-d-8 {
				t.Errorf("run at depth %d: causes_omitted %v, want %d", d, above["causes_omitted"], bottom-d-8)
			}
		}
		if !strings.Contains(r.Error, "bottom reached") {
			t.Errorf("run at depth %d: the error text lost the innermost failure: %q", d, r.Error)
		}
	}
	// Bounded: the stored errors grow over the first levels above the
	// bottom (until the quoted messages reach their cap) and then stay
	// the same size, small.
	for d := 1; d <= 5; d++ {
		if sizes[d] != sizes[0] || sizes[0] > 20<<10 {
			t.Fatalf("error_json bytes by depth %v: still growing toward the root, or over 20 KiB", sizes)
		}
	}
}
