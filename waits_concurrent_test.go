package starflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Waits in several parallel lanes at once each register; the other lanes
// run to their end; the run parks once and continues lane by lane.
func TestWaitsInParallelLanes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: lanes
steps:
  - id: fan
    parallel:
      lanes:
        a:
          - id: wa
            wait: {signal: a}
          - id: after_a
            context_set: {a: "${{ steps.wa.output }}"}
        b:
          - id: wb
            wait: {signal: b}
        c:
          - id: plain
            context_set: {c: 3}
  - id: join
    context_set: {sum: "${{ variables.a + steps.fan.output.b + variables.c }}"}
output: "${{ variables.sum }}"
`)
	run := h.enqueue("lanes", nil)
	awaitParked(t, h, run.ID)
	ws := h.waits(run.ID)
	if len(ws) != 2 || ws[0].ScopePath == ws[1].ScopePath {
		t.Fatalf("want one wait per lane: %+v", ws)
	}
	for _, w := range ws {
		if w.Status != starflowtype.WaitPending || !strings.HasPrefix(w.ScopePath, "fan.lane_") {
			t.Fatalf("wait: %+v", w)
		}
	}
	if st := stepByID(h.steps(run.ID), "plain"); st == nil || st.Status != starflowtype.StepSucceeded {
		t.Fatalf("lane c did not run to its end while a and b waited: %+v", st)
	}
	if _, err := h.eng.Signal(context.Background(), run.ID, "b", json.RawMessage(`20`)); err != nil {
		t.Fatal(err)
	}
	awaitRun(t, h, run.ID, "parked again", func(r *starflowtype.Run) bool {
		return r.ClaimState == starflowtype.ClaimParked && countEvents(h.events(run.ID), starflowtype.EventNodeComplete, "wb") == 1
	})
	if _, err := h.eng.Signal(context.Background(), run.ID, "a", json.RawMessage(`100`)); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "123" {
		t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
	}
	evs := h.events(run.ID)
	if countEvents(evs, starflowtype.EventNodeComplete, "plain") != 1 || countEvents(evs, starflowtype.EventNodeComplete, "fan") != 1 {
		t.Errorf("a finished step ran again: %v", eventTypes(evs))
	}
	if n := len(h.waits(run.ID)); n != 2 {
		t.Errorf("re-entered waits registered again: %d waits", n)
	}
}

// for_each items that wait, addressed by correlation key.
func TestWaitsInForEachByCorrelationKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: items
steps:
  - id: each
    for_each:
      items: "${{ input.orders }}"
      as: order
      concurrency: 3
      steps:
        - id: shipped
          wait: {signal: shipped, correlation_key: "${{ 'order-' + order }}"}
output: "${{ steps.each.output }}"
`)
	run := h.enqueue("items", map[string]any{"orders": []string{"x", "y", "z"}})
	awaitParked(t, h, run.ID)
	if ws := h.waits(run.ID); len(ws) != 3 {
		t.Fatalf("want three waits: %+v", ws)
	}
	var wg sync.WaitGroup
	for i, o := range []string{"z", "x", "y"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.eng.SignalKey(context.Background(), "shipped", "order-"+o, json.RawMessage(fmt.Sprintf(`{"o": %q, "i": %d}`, o, i)))
			if err != nil || res.Wait == nil {
				t.Errorf("signal %s: %+v %v", o, res, err)
			}
		}()
	}
	wg.Wait()
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != `[{"i":1,"o":"x"},{"i":2,"o":"y"},{"i":0,"o":"z"}]` {
		t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
	}
}

// The fault-injection test of the wait/wake ordering (seed 000
// wait-checkpoint-before-wake): the engine is held at each commit boundary
// of entering a wait while a signal is sent; at every point the run
// already has its paused snapshot (never an empty checkpoint), the signal
// is applied exactly once (from the inbox when it came before the wait
// existed), and the notify request never precedes the wait row.
func TestWaitSignalAtEveryCommitBoundary(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"engine.wait.after_paused", "engine.wait.after_register", "engine.wait.before_notify"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			var h *harness
			var once sync.Once
			fired := make(chan error, 1)
			h = newHarness(t, starflow.Config{WaitHook: func(p, runID, scope, stepID string) {
				if p != point || stepID != "approve" {
					return
				}
				once.Do(func() {
					ctx := context.Background()
					run, err := h.store.GetRun(ctx, &state.GetRunParams{ID: runID})
					if err != nil {
						fired <- err
						return
					}
					if run.Status != starflowtype.RunPaused || len(run.Checkpoint) == 0 || !strings.Contains(string(run.Checkpoint), "__celestialWait") {
						fired <- fmt.Errorf("at %s the run is %s with checkpoint %q", p, run.Status, run.Checkpoint)
						return
					}
					res, err := h.eng.Signal(ctx, runID, "go", json.RawMessage(`{"ok": "once"}`))
					if err == nil && point == "engine.wait.after_paused" && res.Inbox == nil {
						err = fmt.Errorf("a signal before registration should go to the inbox: %+v", res)
					}
					if err == nil && point != "engine.wait.after_paused" && res.Wait == nil {
						err = fmt.Errorf("a signal after registration should wake the wait: %+v", res)
					}
					fired <- err
				})
			}})
			sink, srv := newNotifySink(t, h.store)
			h.start()
			h.apply(`name: sig
steps:
  - id: before
    context_set: {x: 1}
  - id: approve
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
  - id: after
    context_set: {got: "${{ steps.approve.output.ok }}"}
output: "${{ variables }}"
`)
			run := h.enqueue("sig", nil)
			if err := <-fired; err != nil {
				t.Fatal(err)
			}
			end := awaitEnd(t, h, run.ID)
			if end.Status != starflowtype.RunSucceeded || jsonOf(t, end.Output)["got"] != "once" {
				t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
			}
			evs := h.events(run.ID)
			if countEvents(evs, starflowtype.EventWakeReceived, "") != 1 || countEvents(evs, starflowtype.EventNodeComplete, "approve") != 1 ||
				countEvents(evs, starflowtype.EventNodeStart, "before") != 1 {
				t.Fatalf("events: %v", eventTypes(evs))
			}
			ws := h.waits(run.ID)
			if len(ws) != 1 || ws[0].Status != starflowtype.WaitWoken {
				t.Fatalf("waits: %+v", ws)
			}
			sink.checkNoneEarly(t)
			if point == "engine.wait.before_notify" {
				// The wait was woken before the token went out: it is
				// still sent (the receiver's wake then answers 410).
				sink.next(t)
			}
		})
	}
}

// A lane parked at a wait while a sibling lane failed, inside a try that
// catches the failure: the waiting step is given up (recorded failed), so
// a later wake of its wait does not re-queue the run over and over; the
// run goes on to its next wait and ends normally.
func TestWaitAbandonedWhenTryCatchesSiblingFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: abandon
steps:
  - id: guard
    try:
      steps:
        - id: fan
          parallel:
            fail_fast: false
            lanes:
              a: [{id: wa, wait: {signal: a}}]
              b: [{id: boom, fail: {message: broken}}]
      catch:
        - id: handled
          context_set: {caught: "${{ error.message }}"}
  - id: final
    wait: {signal: final}
output: "${{ [variables.caught, steps.final.output] }}"
`)
	run := h.enqueue("abandon", nil)
	awaitRun(t, h, run.ID, "parked at final", func(r *starflowtype.Run) bool {
		return r.ClaimState == starflowtype.ClaimParked && len(h.waits(run.ID)) == 2
	})
	if st := stepByID(h.steps(run.ID), "wa"); st == nil || st.Status != starflowtype.StepFailed || !strings.Contains(st.Error, "abandoned") {
		t.Fatalf("abandoned wait step: %+v", st)
	}
	// A stray wake of the abandoned wait: the run is claimed at most once
	// and parks again.
	if res, err := h.eng.Signal(context.Background(), run.ID, "a", nil); err != nil || res.Wait == nil {
		t.Fatalf("stray signal: %+v %v", res, err)
	}
	claims := func() int { return countEvents(h.events(run.ID), starflowtype.EventRunClaimed, "") }
	before := claims()
	awaitParked(t, h, run.ID)
	time.Sleep(300 * time.Millisecond)
	if n := claims(); n > before+1 {
		t.Fatalf("the run was claimed %d more times after a stray wake", n-before)
	}
	if _, err := h.eng.Signal(context.Background(), run.ID, "final", json.RawMessage(`"done"`)); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != `["broken","done"]` {
		t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
	}
}
