package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// Tries across continued executions of one attempt (issue 10 item 12,
// decision 95): a try cut off mid-flight and continued by another runner
// is the next try; a construct or a wait re-entered writes no second
// node_start.

// tryNumbers lists the payload "try" of the events of type typ of step id.
func tryNumbers(t *testing.T, evs []*starflowtype.Event, typ starflowtype.EventType, id string) []int {
	t.Helper()
	var out []int
	for _, e := range evs {
		if e.Type != typ || e.NodeID != id {
			continue
		}
		var p struct {
			Try *int `json:"try"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil || p.Try == nil {
			t.Fatalf("%s of %s: payload %s has no try", typ, id, e.Payload)
		}
		out = append(out, *p.Try)
	}
	return out
}

// TestContinuedTryIsTheNextTry: a step inside an if is cut off mid-flight
// (the first runner stops past its grace period and releases the lease);
// another runner continues the same attempt. The continued try is try 2
// (the handler sees it, the row's tries and the node_start payloads say
// it), and the retry budget of the continuation is whole: with
// max_attempts 2 it fails try 2 and succeeds try 3. The if is re-entered:
// one node_start, one node_complete.
func TestContinuedTryIsTheNextTry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	entered := make(chan struct{}, 1)
	h.eng.RegisterStep("hold", func(ctx context.Context, req *step.Request) (any, error) {
		entered <- struct{}{}
		<-ctx.Done() // cut off: never answers before the grace period ends
		return nil, ctx.Err()
	})
	if err := h.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := h.apply(`name: cutoff
steps:
  - id: outer
    if:
      condition: "${{ true }}"
      then:
        - id: hold
          hold: {}
          retry_policy: {max_attempts: 2, initial_interval: 10ms}
`)
	run := h.enqueue(d.Name, nil)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // grace period
	defer cancel()
	if err := h.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := h.store.GetRun(context.Background(), &state.GetRunParams{ID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if r.ClaimState != starflowtype.ClaimQueued || r.LeasedBy != "" {
		t.Fatalf("after the stop: %s/%s leased_by %q; want the lease released", r.Status, r.ClaimState, r.LeasedBy)
	}
	if st := stepByID(h.steps(run.ID), "hold"); st == nil || st.Status != starflowtype.StepRunning || st.Tries != 1 {
		t.Fatalf("hold after the cut-off: %+v; want running, tries 1", st)
	}

	eng2, err := starflow.New(starflow.Config{Store: h.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []int
	eng2.RegisterStep("hold", func(ctx context.Context, req *step.Request) (any, error) {
		mu.Lock()
		seen = append(seen, req.Try)
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			return nil, errors.New("transient failure")
		}
		return "done", nil
	})
	if err := eng2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer eng2.Stop(context.Background())
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	final, err := eng2.WaitRun(wctx, run.ID)
	if err != nil || final.Status != starflowtype.RunSucceeded || final.Attempt != 1 {
		t.Fatalf("final run: %+v %v; want succeeded in attempt 1", final, err)
	}

	mu.Lock()
	if !slices.Equal(seen, []int{2, 3}) {
		t.Errorf("the continuing runner's handler saw tries %v, want [2 3]", seen)
	}
	mu.Unlock()
	steps := h.steps(run.ID)
	if st := stepByID(steps, "hold"); st == nil || st.Status != starflowtype.StepSucceeded || st.Tries != 3 {
		t.Errorf("hold row %+v: want succeeded, tries 3", st)
	}
	if st := stepByID(steps, "outer"); st == nil || st.Status != starflowtype.StepSucceeded || st.Tries != 1 {
		t.Errorf("outer row %+v: want succeeded, tries 1", st)
	}
	evs := h.events(run.ID)
	for _, c := range []struct {
		typ  starflowtype.EventType
		id   string
		want []int
	}{
		{starflowtype.EventNodeStart, "hold", []int{1, 2, 3}},
		{starflowtype.EventNodeRetry, "hold", []int{2}},
		{starflowtype.EventNodeComplete, "hold", []int{3}},
		{starflowtype.EventNodeStart, "outer", []int{1}},
		{starflowtype.EventNodeComplete, "outer", []int{1}},
	} {
		if got := tryNumbers(t, evs, c.typ, c.id); !slices.Equal(got, c.want) {
			t.Errorf("%s of %s: tries %v, want %v (events %v)", c.typ, c.id, got, c.want, eventTypes(evs))
		}
	}
}

// TestConstructReenteredAfterWaitStartsOnce: an if and a parallel each
// park at a wait inside them; after each wake the engine re-enters them.
// Every construct and wait has exactly one node_start and one
// node_complete, all of try 1, and its row tries 1.
func TestConstructReenteredAfterWaitStartsOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: reenter
steps:
  - id: outer
    if:
      condition: "${{ true }}"
      then:
        - id: gate
          wait: {signal: go}
        - id: after
          context_set: {x: 1}
  - id: fan
    parallel:
      lanes:
        fast:
          - id: quick
            context_set: {y: 2}
        slow:
          - id: gate2
            wait: {signal: go2}
`)
	run := h.enqueue("reenter", nil)
	for _, sig := range []string{"go", "go2"} {
		awaitParked(t, h, run.ID)
		if _, err := h.eng.Signal(context.Background(), run.ID, sig, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("signal %s: %v", sig, err)
		}
		// Wait until the signal's wait completed before the next one.
		id := map[string]string{"go": "gate", "go2": "gate2"}[sig]
		awaitRun(t, h, run.ID, fmt.Sprintf("past %s", id), func(*starflowtype.Run) bool {
			st := stepByID(h.steps(run.ID), id)
			return st != nil && st.Status == starflowtype.StepSucceeded
		})
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	evs := h.events(run.ID)
	steps := h.steps(run.ID)
	for _, id := range []string{"outer", "gate", "after", "fan", "quick", "gate2"} {
		for _, typ := range []starflowtype.EventType{starflowtype.EventNodeStart, starflowtype.EventNodeComplete} {
			if got := tryNumbers(t, evs, typ, id); !slices.Equal(got, []int{1}) {
				t.Errorf("%s of %s: tries %v, want exactly one, try 1 (events %v)", typ, id, got, eventTypes(evs))
			}
		}
		if st := stepByID(steps, id); st == nil || st.Status != starflowtype.StepSucceeded || st.Tries != 1 {
			t.Errorf("%s row %+v: want succeeded, tries 1", id, st)
		}
	}
}

// TestCaughtFailureNotRunAgainOnWake: a try whose catch parks at a wait
// is re-entered when the wait is woken (a new execution of the attempt);
// the body's step that failed is not run again — its recorded failure is
// what the catch goes on with — and the catch's steps before the wait are
// restored, not re-run.
func TestCaughtFailureNotRunAgainOnWake(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("charge", func(context.Context, *step.Request) (any, error) {
		if calls.Add(1) == 1 {
			return nil, step.Permanent(errors.New("card declined"))
		}
		return "charged", nil // a second call would take the try's other path
	})
	h.start()
	h.apply(`name: caught-wait
steps:
  - id: pay
    try:
      steps:
        - id: before
          context_set: {x: 1}
        - id: charge
          charge: {}
        - id: never
          context_set: {y: 1}
      catch:
        - id: note
          context_set: {declined: "${{ error.message }}"}
        - id: review
          wait: {signal: go}
        - id: after
          context_set: {seen: "${{ error.message }}", x_seen: "${{ variables.x }}"}
output: "${{ variables }}"
`)
	run := h.enqueue("caught-wait", nil)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("signal: %v", err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the failed step ran %d times, want once", n)
	}
	out := outputOf(t, end)
	if out["y"] != nil || out["x_seen"] != 1.0 || !strings.Contains(fmt.Sprint(out["seen"]), "card declined") || out["declined"] != out["seen"] {
		t.Errorf("output: %s", end.Output)
	}
	evs := h.events(run.ID)
	for _, id := range []string{"charge", "note", "review", "after", "pay"} {
		if got := tryNumbers(t, evs, starflowtype.EventNodeStart, id); !slices.Equal(got, []int{1}) {
			t.Errorf("node_start of %s: tries %v, want exactly one (events %v)", id, got, eventTypes(evs))
		}
	}
	if n := countEvents(evs, starflowtype.EventNodeError, "charge"); n != 1 {
		t.Errorf("node_error of charge: %d, want 1", n)
	}
}

// TestCaughtConstructFailureReplayedOnce: the failure caught came from a
// step inside a construct of the try's body; re-entered after the catch's
// wait, the construct is walked again to replay it and writes no second
// node_start or node_error, and the catch sees the same error.
func TestCaughtConstructFailureReplayedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("charge", func(context.Context, *step.Request) (any, error) {
		calls.Add(1)
		return nil, step.Permanent(errors.New("card declined"))
	})
	h.start()
	h.apply(`name: caught-construct
steps:
  - id: pay
    try:
      steps:
        - id: branch
          if:
            condition: "${{ true }}"
            then:
              - id: set
                context_set: {x: 1}
              - id: charge
                charge: {}
      catch:
        - id: note
          context_set: {first: "${{ error.step_id + '/' + error.message }}"}
        - id: review
          wait: {signal: go}
        - id: after
          context_set: {second: "${{ error.step_id + '/' + error.message }}", x_seen: "${{ variables.x }}"}
output: "${{ variables }}"
`)
	run := h.enqueue("caught-construct", nil)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("signal: %v", err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the failed step ran %d times, want once", n)
	}
	out := outputOf(t, end)
	if out["first"] != out["second"] || !strings.Contains(fmt.Sprint(out["second"]), "charge/") || out["x_seen"] != 1.0 {
		t.Errorf("output: %s", end.Output)
	}
	evs := h.events(run.ID)
	for _, id := range []string{"branch", "charge"} {
		if got := tryNumbers(t, evs, starflowtype.EventNodeStart, id); !slices.Equal(got, []int{1}) {
			t.Errorf("node_start of %s: tries %v, want exactly one (events %v)", id, got, eventTypes(evs))
		}
		if n := countEvents(evs, starflowtype.EventNodeError, id); n != 1 {
			t.Errorf("node_error of %s: %d, want 1 (events %v)", id, n, eventTypes(evs))
		}
	}
}
