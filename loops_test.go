package starflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

func TestRepeatUntil(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	h.start()
	run := h.runToEnd(`
name: polling
steps:
  - id: init
    context_set: {count: 0}
  - id: poll
    repeat_until:
      until: "${{ steps.bump.output.count >= 3 }}"
      max_iterations: 5
      steps:
        - id: bump
          context_set: {count: "${{ variables.count + 1 }}"}
        - id: mark
          record: {label: "${{ string(variables.count) + '/' + string(has(steps.mark.output)) }}"}
  - id: after
    context_set: {poll_out: "${{ steps.poll.output }}", inner_visible: "${{ has(steps.bump) }}"}
output: "${{ variables }}"
`, nil)
	mustSucceed(t, run)
	want := `{"count":3,"inner_visible":false,"poll_out":{"key":"` + run.ID + `/poll.iter_2/mark","label":"3/false"}}`
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	wantRows := []string{"-|init|context_set|succeeded", "-|poll|repeat_until|succeeded",
		"poll.iter_0|bump|context_set|succeeded", "poll.iter_0|mark|record|succeeded",
		"poll.iter_1|bump|context_set|succeeded", "poll.iter_1|mark|record|succeeded",
		"poll.iter_2|bump|context_set|succeeded", "poll.iter_2|mark|record|succeeded",
		"-|after|context_set|succeeded"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
	cp := checkpointOf(h, run.ID, "", "poll")
	if cp == nil || string(cp.Context) != `{"count":3}` {
		t.Fatalf("checkpoint of the loop: %+v", cp)
	}
	if n := countSideEffects(t, h.store.DB(), run.ID); n != 3 {
		t.Fatalf("%d side effects, want 3", n)
	}
}

func TestRepeatUntilMaxIterationsExceeded(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: endless
steps:
  - id: loop
    repeat_until:
      until: "false"
      max_iterations: 2
      steps:
        - id: tick
          context_set: {t: 1}
  - id: after
    context_set: {x: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "max_iterations_exceeded") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	wantRows := []string{"-|loop|repeat_until|failed", "loop.iter_0|tick|context_set|succeeded",
		"loop.iter_1|tick|context_set|succeeded", "-|after|context_set|skipped"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
}

// TestRepeatUntilResumedInside: a loop cut off in its third iteration
// resumes there; the first two iterations are restored.
func TestRepeatUntilResumedInside(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	rc := interruptAndResume(t, h, `
name: repeat-resume
steps:
  - id: loop
    repeat_until:
      until: "${{ variables.n >= 4 }}"
      max_iterations: 10
      steps:
        - id: inc
          context_set: {n: "${{ (has(variables.n) ? variables.n : 0) + 1 }}"}
        - id: work
          rec: {label: "${{ 'n=' + string(variables.n) }}"}
output: "${{ {'loop': steps.loop.output, 'n': variables.n} }}"
`, nil, 3)
	rc.check(t)
	if !rc.checkpointed["loop.iter_1|work"] || rc.checkpointed["loop.iter_2|work"] {
		t.Fatalf("interrupted at the wrong place: %v", rc.checkpointed)
	}
	if want := `{"loop":{"label":"n=4","scope":"loop.iter_3"},"n":4}`; string(rc.interrupted.Output) != want {
		t.Fatalf("output %s, want %s", rc.interrupted.Output, want)
	}
}
