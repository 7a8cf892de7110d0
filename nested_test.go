package starflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/step"
)

// nestedFixture: a for_each (concurrency 4) inside a parallel lane inside
// a try, a repeat_until and an if in the other lanes, a failure after the
// fan-out that the catch handles, and a finally. rec steps: 12 pack, 3
// ping, big, recover = 17 executions.
const nestedFixture = `
name: nested
steps:
  - id: setup
    context_set: {base: 10}
  - id: guarded
    try:
      steps:
        - id: fanout
          parallel:
            lanes:
              ship:
                - id: each
                  for_each:
                    items: "${{ input.items }}"
                    as: order
                    concurrency: 4
                    steps:
                      - id: pack
                        rec: {label: "${{ 'pack-' + string(order) }}"}
                      - id: tally
                        context_set: {shipped: "${{ order + variables.base }}"}
              notify:
                - id: rounds
                  repeat_until:
                    until: "${{ variables.n >= 3 }}"
                    max_iterations: 5
                    steps:
                      - id: bump
                        context_set: {n: "${{ (has(variables.n) ? variables.n : 0) + 1 }}"}
                      - id: ping
                        rec: {label: "${{ 'ping-' + string(variables.n) }}"}
              audit:
                - id: check
                  if:
                    condition: "${{ size(input.items) > 3 }}"
                    then:
                      - id: big
                        rec: {label: big}
        - id: boom
          fail: {message: "${{ 'after fanout ' + string(variables.shipped) + ' ' + string(steps.fanout.output.audit.label) }}"}
      catch:
        - id: recover
          rec: {label: "${{ error.step_id + ': ' + error.message }}"}
      finally:
        - id: done
          context_set: {finished: true}
output: "${{ {'vars': variables, 'guarded': steps.guarded.output, 'fanout_visible': 'fanout' in steps} }}"
`

var nestedInput = map[string]any{"items": []any{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}

func TestNestedConstructs(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	c := newExecCounter()
	if err := h.eng.RegisterStep("rec", recStep(c, 0, nil)); err != nil {
		t.Fatal(err)
	}
	h.start()
	run := h.runToEnd(nestedFixture, nestedInput)
	mustSucceed(t, run)
	want := `{"fanout_visible":false,"guarded":{"label":"boom: after fanout 21 big","scope":""},` +
		`"vars":{"base":10,"finished":true,"n":3,"shipped":21}}`
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	rows := rowSet(h, run.ID)
	if len(rows) != 40 {
		t.Fatalf("%d step rows, want 40: %v", len(rows), rows)
	}
	for _, r := range []string{
		"-|guarded|try|succeeded", "-|fanout|parallel|succeeded", "-|boom|fail|failed", "-|recover|rec|succeeded", "-|done|context_set|succeeded",
		"fanout.lane_ship|each|for_each|succeeded", "fanout.lane_ship/each.item_3|pack|rec|succeeded",
		"fanout.lane_ship/each.item_11|tally|context_set|succeeded", "fanout.lane_notify|rounds|repeat_until|succeeded",
		"fanout.lane_notify/rounds.iter_2|ping|rec|succeeded", "fanout.lane_audit|check|if|succeeded", "fanout.lane_audit|big|rec|succeeded",
	} {
		if !contains(rows, r) {
			t.Errorf("no ledger row %s in %v", r, rows)
		}
	}
	for k, n := range c.snapshot() {
		if n != 1 {
			t.Errorf("%s executed %d times", k, n)
		}
	}
	if len(c.snapshot()) != 17 {
		t.Fatalf("%d rec instances executed, want 17", len(c.snapshot()))
	}
}

// TestNestedConstructsResume: the nested fixture cut off at several
// moments (inside the for_each, the loop, the catch) and finished by a
// second engine ends with exactly the output of an uninterrupted run, and
// no instance checkpointed before the cut runs again.
func TestNestedConstructsResume(t *testing.T) {
	for _, blockAt := range []int64{2, 7, 13, 17} {
		t.Run(fmt.Sprintf("cut_at_%d", blockAt), func(t *testing.T) {
			h := newHarness(t, starflow.Config{})
			rc := interruptAndResume(t, h, nestedFixture, nestedInput, blockAt)
			rc.check(t)
			if total := len(rc.first) + len(rc.second); total < 17 {
				t.Fatalf("%d distinct rec instances ran, want at least 17", total)
			}
			if blockAt == 17 && (len(rc.second) != 1 || rc.second["|recover"] != 1) {
				t.Fatalf("cut at the catch: the second engine ran %v", rc.second)
			}
		})
	}
}

// TestResumeModeNewAttemptInsideLoop: in resume recovery mode a transient
// failure inside a for_each item starts a new attempt that restores every
// instance checkpointed by the first one (earlier attempts' checkpoints)
// and executes only the rest.
func TestResumeModeNewAttemptInsideLoop(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	c := newExecCounter()
	if err := h.eng.RegisterStep("rec", recStep(c, 0, nil)); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	if err := h.eng.RegisterStep("flaky", func(_ context.Context, req *step.Request) (any, error) {
		if req.Input.(map[string]any)["i"] == int64(3) && failed.CompareAndSwap(false, true) {
			return nil, errors.New("downstream unavailable") // transient
		}
		return req.ScopePath, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.start()
	run := h.runToEnd(`
name: resume-mode
recovery_mode: resume
max_attempts: 2
steps:
  - id: each
    for_each:
      items: "${{ [0, 1, 2, 3, 4, 5] }}"
      concurrency: 2
      steps:
        - id: work
          rec: {label: "${{ string(item) }}"}
        - id: maybe
          flaky: {i: "${{ item }}"}
          retry_policy: {max_attempts: 1}
`, nil)
	mustSucceed(t, run)
	if run.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", run.Attempt)
	}
	if want := `["each.item_0","each.item_1","each.item_2","each.item_3","each.item_4","each.item_5"]`; string(run.Output) != want {
		t.Fatalf("output %s", run.Output)
	}
	got := c.snapshot()
	if len(got) != 6 {
		t.Fatalf("rec instances %v", got)
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s executed %d times across attempts", k, n)
		}
	}
}
