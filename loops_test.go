package starflow_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
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
          record: {label: "${{ string(variables.count) + '/' + string(steps.exists(k, k == 'mark' && 'output' in steps[k])) }}"}
  - id: after
    context_set: {poll_out: "${{ steps.poll.output }}", inner_visible: "${{ 'bump' in steps }}"}
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

func TestForEach(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	h.start()
	run := h.runToEnd(`
name: shipping
steps:
  - id: ship
    for_each:
      items: "${{ input.orders }}"
      as: order
      steps:
        - id: label
          context_set: {last: "${{ order.id }}"}
        - id: send
          record: {label: "${{ order.id + ':' + variables.last + ':' + string(has(steps.label.output)) }}"}
  - id: after
    context_set: {shipped: "${{ steps.ship.output.map(o, o.label) }}", keys: "${{ steps.ship.output.map(o, o.key) }}"}
output: "${{ variables }}"
`, map[string]any{"orders": []any{map[string]any{"id": "a"}, map[string]any{"id": "b"}, map[string]any{"id": "c"}}})
	mustSucceed(t, run)
	out := outputOf(t, run)
	if out["last"] != "c" || !reflect.DeepEqual(out["shipped"], []any{"a:a:true", "b:b:true", "c:c:true"}) {
		t.Fatalf("output %s", run.Output)
	}
	if k := out["keys"].([]any)[1]; k != run.ID+"/ship.item_1/send" {
		t.Fatalf("Idempotency-Key of item 1: %v", k)
	}
	wantRows := []string{"-|ship|for_each|succeeded",
		"ship.item_0|label|context_set|succeeded", "ship.item_0|send|record|succeeded",
		"ship.item_1|label|context_set|succeeded", "ship.item_1|send|record|succeeded",
		"ship.item_2|label|context_set|succeeded", "ship.item_2|send|record|succeeded",
		"-|after|context_set|succeeded"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
	if cp := checkpointOf(h, run.ID, "", "ship"); cp == nil || string(cp.Context) != `{"last":"c"}` {
		t.Fatalf("checkpoint of the loop: %+v", cp)
	}
}

// TestForEachConcurrentMergeOrder: 50 items, 4 at a time; each records a
// side effect and sets variables. The items finish in any order, but their
// changes are merged in item order: the last item's value wins, and each
// item saw the context as of the loop's start, not its siblings' changes.
func TestForEachConcurrentMergeOrder(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	var inFlight, maxInFlight atomic.Int64
	h.eng.RegisterStep("gauge", func(ctx context.Context, req *step.Request) (any, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		// Later items finish first, so completion order is not item order.
		i := req.Input.(map[string]any)["i"].(int64)
		time.Sleep(time.Duration(50-i%5*10) * time.Millisecond / 10)
		return i, nil
	})
	h.start()
	items := make([]any, 50)
	for i := range items {
		items[i] = i
	}
	run := h.runToEnd(`
name: fanout
steps:
  - id: init
    context_set: {seen: [], last: -1}
  - id: each
    for_each:
      items: "${{ input.items }}"
      concurrency: 4
      steps:
        - id: measure
          gauge: {i: "${{ item }}"}
        - id: effect
          record: {label: "${{ 'item-' + string(item) }}"}
        - id: note
          context_set: {last: "${{ item }}", seen: "${{ variables.seen + [item] }}", sum_before: "${{ variables.last }}"}
output: "${{ {'vars': variables, 'out': steps.each.output} }}"
`, map[string]any{"items": items})
	mustSucceed(t, run)
	out := outputOf(t, run)
	vars := out["vars"].(map[string]any)
	if vars["last"] != float64(49) || !reflect.DeepEqual(vars["seen"], []any{float64(49)}) || vars["sum_before"] != float64(-1) {
		t.Fatalf("merged variables %v", vars)
	}
	list := out["out"].([]any)
	if len(list) != 50 {
		t.Fatalf("output has %d entries", len(list))
	}
	for i, o := range list {
		m := o.(map[string]any)
		if m["last"] != float64(i) || !reflect.DeepEqual(m["seen"], []any{float64(i)}) {
			t.Fatalf("item %d output %v", i, o)
		}
	}
	if n := countSideEffects(t, h.store.DB(), run.ID); n != 50 {
		t.Fatalf("%d side effects, want 50", n)
	}
	if m := maxInFlight.Load(); m < 2 || m > 4 {
		t.Fatalf("at most %d items in flight, want 2..4 (concurrency 4)", m)
	}
	rows := rowSet(h, run.ID)
	var want []string
	for i := range 50 {
		sc := fmt.Sprintf("each.item_%d", i)
		want = append(want, sc+"|effect|record|succeeded", sc+"|measure|gauge|succeeded", sc+"|note|context_set|succeeded")
	}
	want = append(want, "-|each|for_each|succeeded", "-|init|context_set|succeeded")
	sort.Strings(want)
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("ledger\n got %v\nwant %v", rows, want)
	}
	if n := len(h.checkpoints(run.ID)); n != len(want) {
		t.Fatalf("%d checkpoints for %d succeeded instances", n, len(want))
	}
}

func TestForEachFailures(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: not-a-list
steps:
  - id: each
    for_each:
      items: "${{ 'abc' }}"
      steps:
        - id: x
          context_set: {x: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "must evaluate to a list, got a string") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	run = h.runToEnd(`
name: item-fails
steps:
  - id: each
    for_each:
      items: "${{ [1, 2, 3, 4] }}"
      steps:
        - id: check
          when: "${{ item == 2 }}"
          fail: {message: "${{ 'bad item ' + string(item) }}"}
        - id: ok
          context_set: {x: "${{ item }}"}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "item 1: step check: bad item 2") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	want := []string{"-|each|for_each|failed", "each.item_0|check|fail|skipped", "each.item_0|ok|context_set|succeeded",
		"each.item_1|check|fail|failed", "each.item_1|ok|context_set|skipped"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
}

// TestRepeatUntilWithForEach: a for_each nested in a loop iteration; scope
// paths nest with '/'.
func TestRepeatUntilWithForEach(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	h.start()
	run := h.runToEnd(`
name: rounds
steps:
  - id: rounds
    repeat_until:
      until: "${{ variables.round >= 2 }}"
      max_iterations: 5
      steps:
        - id: next
          context_set: {round: "${{ (has(variables.round) ? variables.round : 0) + 1 }}"}
        - id: batch
          for_each:
            items: "${{ [1, 2, 3] }}"
            concurrency: 2
            steps:
              - id: work
                record: {label: "${{ string(variables.round) + '-' + string(item) }}"}
output: "${{ steps.rounds.output }}"
`, nil)
	mustSucceed(t, run)
	want := fmt.Sprintf(`[{"key":"%[1]s/rounds.iter_1/batch.item_0/work","label":"2-1"},`+
		`{"key":"%[1]s/rounds.iter_1/batch.item_1/work","label":"2-2"},{"key":"%[1]s/rounds.iter_1/batch.item_2/work","label":"2-3"}]`, run.ID)
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	rows := rowSet(h, run.ID)
	if len(rows) != 1+2*(2+3) || !contains(rows, "rounds.iter_0/batch.item_2|work|record|succeeded") || !contains(rows, "rounds.iter_1|batch|for_each|succeeded") {
		t.Fatalf("ledger %v", rows)
	}
	if n := countSideEffects(t, h.store.DB(), run.ID); n != 6 {
		t.Fatalf("%d side effects, want 6", n)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestForEachResumedInside: a loop of 20 items, 4 at a time, cut off in
// the middle resumes there: finished items and steps are restored.
func TestForEachResumedInside(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	rc := interruptAndResume(t, h, `
name: each-resume
steps:
  - id: each
    for_each:
      items: "${{ input.items }}"
      concurrency: 4
      steps:
        - id: first
          rec: {label: "${{ 'a' + string(item) }}"}
        - id: note
          context_set: {last: "${{ item }}"}
        - id: second
          rec: {label: "${{ 'b' + string(item) + '/' + string(variables.last) }}"}
output: "${{ {'out': steps.each.output, 'last': variables.last} }}"
`, map[string]any{"items": []any{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}, 15)
	rc.check(t)
	if out := outputOf(t, rc.interrupted); out["last"] != float64(19) || len(out["out"].([]any)) != 20 {
		t.Fatalf("output %s", rc.interrupted.Output)
	}
}
