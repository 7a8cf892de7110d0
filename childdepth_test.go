package starflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// runsOf lists every run of workflow name, by depth (one run a depth:
// a chain).
func runsOf(t *testing.T, h *harness, name string) []*starflowtype.Run {
	t.Helper()
	runs, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{WorkflowName: name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	byDepth := make([]*starflowtype.Run, len(runs))
	for _, r := range runs {
		if r.Depth >= len(runs) || byDepth[r.Depth] != nil {
			t.Fatalf("run %s at depth %d: not one chain of %d runs", r.ID, r.Depth, len(runs))
		}
		byDepth[r.Depth] = r
	}
	for d := 1; d < len(byDepth); d++ {
		if byDepth[d].ParentRunID != byDepth[d-1].ID {
			t.Fatalf("run at depth %d is a child of %s, not of the run at depth %d", d, byDepth[d].ParentRunID, d-1)
		}
	}
	return byDepth
}

// causes is the chain of causes of a stored error object, nearest first.
func causes(t *testing.T, detail json.RawMessage) []*starflowtype.ErrorInfo {
	t.Helper()
	info := starflowtype.ParseErrorInfo(detail)
	if info == nil {
		t.Fatalf("no error object in %s", detail)
	}
	var out []*starflowtype.ErrorInfo
	for c := info.Cause; c != nil; c = c.Cause {
		out = append(out, c)
	}
	return out
}

// TestSelfRecursionStopsAtChildDepth: a workflow that calls itself with
// nothing to stop it (the new-user check's `recurse`) makes a chain of
// exactly Limits.ChildDepth child runs below its root; the deepest one's
// workflow_call fails without starting a child, with an error naming the
// cap and the chain's depth, not retried, and the failure travels up to
// the root. The default cap (32) applies.
func TestSelfRecursionStopsAtChildDepth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: recurse
steps:
  - id: me
    workflow_call: {workflow: recurse}
`)
	root := h.enqueue("recurse", nil)
	end := awaitEnd(t, h, root.ID)
	if end.Status != starflowtype.RunFailed || end.Attempt != 1 {
		t.Fatalf("root %s at attempt %d, want failed at attempt 1: %s", end.Status, end.Attempt, end.Error)
	}
	chain := runsOf(t, h, "recurse")
	if len(chain) != starflow.ChildDepthDefault+1 {
		t.Fatalf("%d runs, want the root and %d children", len(chain), starflow.ChildDepthDefault)
	}
	want := "workflow_call me: the child run of recurse would be at depth 33 (this run is 32 workflow_calls below its root run), which exceeds the limit of 32 (limits.child_depth; raise it with --max-child-depth, STARFLOW_MAX_CHILD_DEPTH or starflow.Config.Limits.ChildDepth)"
	deepest := chain[len(chain)-1]
	if deepest.Status != starflowtype.RunFailed || deepest.Attempt != 1 || !strings.Contains(deepest.Error, want) {
		t.Fatalf("deepest run (depth %d): %s at attempt %d: %q\nwant the error %q", deepest.Depth, deepest.Status, deepest.Attempt, deepest.Error, want)
	}
	if ws := h.waits(deepest.ID); len(ws) != 0 {
		t.Errorf("the deepest run registered %d waits; its workflow_call must fail before entering one", len(ws))
	}
	for _, r := range chain {
		if r.Status != starflowtype.RunFailed || r.Attempt != 1 {
			t.Errorf("run at depth %d: %s at attempt %d, want failed at attempt 1", r.Depth, r.Status, r.Attempt)
		}
	}
	// The root's error says what happened at the bottom.
	if !strings.Contains(end.Error, "exceeds the limit of 32 (limits.child_depth") {
		t.Errorf("root's error does not name the cap: %q", end.Error)
	}
	cs := causes(t, end.ErrorDetail)
	if inner := cs[len(cs)-1]; inner.Type != starflowtype.ErrorUntyped || inner.Message != want || inner.StepID != "me" {
		t.Errorf("root's innermost cause: %+v", inner)
	}
}

// TestChildDepthCaughtByTry: the failure at the cap is a step failure
// like any other: a try around the workflow_call catches it, and the
// chain then succeeds from the bottom up. Config.Limits.ChildDepth sets
// the cap.
func TestChildDepthCaughtByTry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Limits: starflow.Limits{ChildDepth: 3}})
	h.start()
	h.apply(`name: nest
steps:
  - id: guard
    try:
      steps:
        - id: deeper
          workflow_call: {workflow: nest}
      catch:
        - id: bottom
          pass: {type: "${{ error.type }}", message: "${{ error.message }}", step: "${{ error.step_id }}", depth: "${{ run.id }}"}
output: "${{ steps.guard.output }}"
`)
	root := h.enqueue("nest", nil)
	end := awaitEnd(t, h, root.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("root %s: %s", end.Status, end.Error)
	}
	chain := runsOf(t, h, "nest")
	if len(chain) != 4 {
		t.Fatalf("%d runs, want the root and 3 children", len(chain))
	}
	var out struct{ Type, Message, Step, Depth string }
	if err := json.Unmarshal(end.Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.Type != starflowtype.ErrorUntyped || out.Step != "deeper" || out.Depth != chain[3].ID ||
		!strings.Contains(out.Message, "workflow_call deeper: the child run of nest would be at depth 4 (this run is 3 workflow_calls below its root run), which exceeds the limit of 3 (limits.child_depth") {
		t.Fatalf("caught at the bottom: %+v", out)
	}
}

// The child-depth cap is a run-time cap: no definition is refused for
// calling itself.
func TestSelfCallAccepted(t *testing.T) {
	t.Parallel()
	if _, err := workflow.Parse("recurse.yaml", []byte("name: recurse\nsteps:\n  - id: me\n    workflow_call: {workflow: recurse}\n"), workflow.ParseOptions{}); err != nil {
		t.Fatal(err)
	}
}
