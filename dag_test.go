package starflow_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

// barrier is a custom step that returns only once `want` instances are
// inside it at the same time: a graph whose independent steps ran one at a
// time would never get there.
func barrier(want int) step.Func {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return func(ctx context.Context, req *step.Request) (any, error) {
		mu.Lock()
		arrived++
		if arrived == want {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return req.StepID, nil
		case <-time.After(20 * time.Second):
			return nil, step.Permanent(context.DeadlineExceeded)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TestRunAfterConcurrentBranches: steps whose dependencies are met run at
// once; a step sees only its dependencies' changes; the join merges in
// list order whatever order the branches finished in.
func TestRunAfterConcurrentBranches(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.eng.RegisterStep("meet", barrier(2))
	h.start()
	run := h.runToEnd(`
name: graph
steps:
  - id: base
    context_set: {k: base}
  - id: left
    run_after: [base]
    meet: {}
    output: "${{ 'left' }}"
  - id: left_set
    run_after: [left]
    context_set: {k: left, from_left: "${{ has(variables.from_right) }}"}
  - id: right
    run_after: [base]
    meet: {}
  - id: right_set
    run_after: [right]
    context_set: {k: right, from_right: "${{ has(variables.from_left) }}"}
  - id: join
    run_after: [left_set, right_set]
    context_set: {seen: "${{ variables.k + ':' + string(variables.from_left) + ':' + string(variables.from_right) }}"}
output: "${{ variables }}"
`, nil)
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	// left_set and right_set cannot see each other; k is right's (later in
	// list order) at the join whichever finished last.
	if !strings.Contains(string(run.Output), `"seen":"right:false:false"`) || !strings.Contains(string(run.Output), `"k":"right"`) {
		t.Fatalf("output %s", run.Output)
	}
	if n := len(h.checkpoints(run.ID)); n != 6 {
		t.Fatalf("%d checkpoints, want 6", n)
	}
}

// TestRunAfterFailureSkipsDependents: a failed branch's dependents are
// skipped, the independent branch in flight finishes, the run fails.
func TestRunAfterFailureSkipsDependents(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: graph-fail
steps:
  - id: a
    run_after: []
    fail: {message: broken}
  - id: b
    run_after: []
    context_set: {x: 1}
  - id: after_a
    run_after: [a]
    context_set: {y: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "broken") {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
	status := map[string]starflowtype.StepStatus{}
	for _, s := range h.steps(run.ID) {
		status[s.StepID] = s.Status
	}
	if status["a"] != starflowtype.StepFailed || status["b"] != starflowtype.StepSucceeded || status["after_a"] != starflowtype.StepSkipped {
		t.Fatalf("ledger %v", status)
	}
}
