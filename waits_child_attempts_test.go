package starflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// A workflow_call starts its child once per step instance, across the
// parent's attempts (decision 37, amended): a later attempt re-attaches to
// the child the earlier one started, and the child's end reaches the
// attempt that waits for it, wherever the end went first.

// childrenOf lists the child runs of parentID.
func childrenOf(t *testing.T, h *harness, parentID string) []*starflowtype.Run {
	t.Helper()
	runs, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{WorkflowName: "child", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []*starflowtype.Run
	for _, r := range runs {
		if r.ParentRunID == parentID {
			out = append(out, r)
		}
	}
	return out
}

// oneChild fails unless parentID has exactly one child run, and returns it.
func oneChild(t *testing.T, h *harness, parentID string) *starflowtype.Run {
	t.Helper()
	cs := childrenOf(t, h, parentID)
	if len(cs) != 1 {
		for _, c := range cs {
			t.Logf("child %s: %s/%s", c.ID, c.Status, c.ClaimState)
		}
		t.Fatalf("parent %s has %d child runs for one workflow_call step, want 1", parentID, len(cs))
	}
	return cs[0]
}

// failOnce is a server that answers 500 to its first request (after
// gate, when set, is closed or 10 s pass) and 200 {"ok":true} afterwards.
func failOnce(t *testing.T, gate <-chan struct{}) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			if gate != nil {
				select {
				case <-gate:
				case <-time.After(10 * time.Second):
				}
			}
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fanDef: lane a calls the child, lane b calls url (one try); the run has
// two attempts.
func fanDef(name, mode, n, url string) string {
	return `name: ` + name + `
recovery_mode: ` + mode + `
max_attempts: 2
steps:
  - id: fan
    parallel:
      fail_fast: false
      lanes:
        a:
          - id: call
            workflow_call: {workflow: child, input: {n: ` + n + `}}
        b:
          - id: flaky
            retry_policy: {max_attempts: 1}
            service_call: {method: POST, url: "` + url + `"}
output: "${{ steps.fan.output }}"
`
}

// The child is still running when the parent's attempt fails: the next
// attempt re-attaches to it (no second child) and its end completes the
// new attempt's wait.
func TestWorkflowCallRetriedAttemptReattachesRunningChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	h.apply(fanDef("fan_running", "resume", "0", failOnce(t, nil).URL)) // n 0: the child holds at its wait
	run := h.enqueue("fan_running", nil)

	// Attempt 2 parks once lane b succeeded; lane a waits on the child.
	awaitRun(t, h, run.ID, "parked in attempt 2", func(r *starflowtype.Run) bool {
		return r.Attempt == 2 && r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked
	})
	child := oneChild(t, h, run.ID)
	awaitParked(t, h, child.ID)
	if _, err := h.eng.Signal(context.Background(), child.ID, "release", nil); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || end.Attempt != 2 {
		t.Fatalf("parent %s at attempt %d: %s", end.Status, end.Attempt, end.Error)
	}
	if out := jsonOf(t, end.Output); out["a"] == nil || jsonOf(t, mustMarshal(t, out["a"]))["doubled"] != 0.0 {
		t.Errorf("parent output %s, want lane a = the child's output {doubled: 0}", end.Output)
	}
	oneChild(t, h, run.ID)
	ws := h.waits(run.ID)
	if len(ws) != 2 {
		t.Fatalf("parent waits: %d, want one per attempt", len(ws))
	}
	for _, w := range ws {
		if w.CorrelationKey != child.ID {
			t.Errorf("wait of attempt %d waits for child %s, want %s", w.Attempt, w.CorrelationKey, child.ID)
		}
	}
	if ws[0].Status != starflowtype.WaitCancelled || ws[1].Status != starflowtype.WaitWoken {
		t.Errorf("waits: attempt %d %s, attempt %d %s; want the first cancelled with its attempt, the second woken",
			ws[0].Attempt, ws[0].Status, ws[1].Attempt, ws[1].Status)
	}
}

// The child ends while the failing attempt still runs (its wait is woken
// but never resumed): the wake goes back to the inbox under the child's
// id and the next attempt's wait, for the same child, consumes it.
func TestWorkflowCallRetriedAttemptGetsChildEndFromInbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	gate := make(chan struct{})
	h.apply(fanDef("fan_ended", "resume", "4", failOnce(t, gate).URL)) // n 4: the child ends at once
	run := h.enqueue("fan_ended", nil)

	// Lane b's first call fails only once the child has ended and woken
	// attempt 1's wait.
	child := childOf(t, h, run.ID)
	awaitRun(t, h, child.ID, "succeeded", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunSucceeded })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws := h.waits(run.ID)
		if len(ws) == 1 && ws[0].Status == starflowtype.WaitWoken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempt 1's wait was never woken by the child's end: %+v", ws)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(gate)

	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || end.Attempt != 2 {
		t.Fatalf("parent %s at attempt %d: %s", end.Status, end.Attempt, end.Error)
	}
	if out := jsonOf(t, end.Output); jsonOf(t, mustMarshal(t, out["a"]))["doubled"] != 8.0 {
		t.Errorf("parent output %s, want lane a = {doubled: 8}", end.Output)
	}
	oneChild(t, h, run.ID)
	var second *starflowtype.Wait
	for _, w := range h.waits(run.ID) {
		if w.Attempt == 2 {
			second = w
		}
	}
	if second == nil || second.Status != starflowtype.WaitWoken || second.CorrelationKey != child.ID {
		t.Fatalf("attempt 2's wait: %+v, want woken, for child %s", second, child.ID)
	}
	if p := jsonOf(t, second.Payload); p["run_id"] != child.ID || p["status"] != "succeeded" {
		t.Errorf("attempt 2's wake payload %s, want the child's end", second.Payload)
	}
	if n := countWakesVia(t, h.events(run.ID), 2, "inbox"); n != 1 {
		t.Errorf("attempt 2 wake_received via inbox: %d, want 1", n)
	}
}

// A parent replayed by an operator after it ended (its child's end was
// resumed long ago, the inbox holds nothing): the call re-attaches to the
// child that already ran and completes from the child's stored end; no
// child runs twice.
func TestWorkflowCallReplayReusesEndedChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	srv := failOnce(t, nil)
	h.apply(`name: replayed
max_attempts: 1
steps:
  - id: call
    workflow_call: {workflow: child, input: {n: 5}}
  - id: check
    retry_policy: {max_attempts: 1}
    service_call: {method: POST, url: "` + srv.URL + `"}
output: "${{ steps.call.output }}"
`)
	run := h.enqueue("replayed", nil)
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunFailed {
		t.Fatalf("first attempt: %s, want failed at check", end.Status)
	}
	child := oneChild(t, h, run.ID)
	if child.Status != starflowtype.RunSucceeded {
		t.Fatalf("child %s", child.Status)
	}
	if _, err := h.eng.Retrigger(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || end.Attempt != 2 || string(end.Output) != `{"doubled":10}` {
		t.Fatalf("replayed parent %s at attempt %d: %s %s", end.Status, end.Attempt, end.Output, end.Error)
	}
	if c := oneChild(t, h, run.ID); c.ID != child.ID || countEvents(h.events(c.ID), starflowtype.EventRunStarted, "") != 1 {
		t.Errorf("the child ran again")
	}
	if n := countWakesVia(t, h.events(run.ID), 2, "child"); n != 1 {
		t.Errorf("attempt 2 wake_received via child: %d, want 1 (from the child's stored end)", n)
	}
}

// The child's id is taken but no idempotency receipt holds it (the
// receipt expired): the insert is refused as a duplicate and the call
// re-attaches to the run that has the id instead of failing.
func TestWorkflowCallChildIDTakenWithoutReceipt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	def := h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": 1}) // not claimed: the engine is not started
	id := engine.ChildRunID(run.ID, "", "call")
	pre, err := h.store.EnqueueRun(context.Background(), &state.EnqueueRunParams{ID: id, DefinitionID: def.ID,
		WorkflowName: def.Name, WorkflowRevision: def.Revision, TriggerType: starflowtype.TriggerChild,
		ParentRunID: run.ID, Input: json.RawMessage(`{"n":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "6" {
		t.Fatalf("parent %s: %s %s (want the output of the child that had the id: 6)", end.Status, end.Output, end.Error)
	}
	if c := oneChild(t, h, run.ID); c.ID != pre.ID {
		t.Fatalf("child %s, want %s", c.ID, pre.ID)
	}
}

// countWakesVia counts wake_received events of attempt whose payload's
// via is via.
func countWakesVia(t *testing.T, evs []*starflowtype.Event, attempt int, via string) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.Type == starflowtype.EventWakeReceived && e.Attempt == attempt && jsonOf(t, e.Payload)["via"] == via {
			n++
		}
	}
	return n
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A cancel that lands after the workflow_call paused its run but before
// the child is enqueued: ParkRun ends the parent and cancels the child.
func TestCancelWhileWorkflowCallEntersItsWait(t *testing.T) {
	t.Parallel()
	var h *harness
	var once sync.Once
	h = newHarness(t, starflow.Config{WaitHook: func(p, runID, scope, stepID string) {
		if p != "engine.wait.after_paused" || stepID != "call" {
			return
		}
		once.Do(func() {
			r, err := h.eng.Cancel(context.Background(), runID)
			if err != nil || !r.CancelRequested {
				t.Errorf("cancel while entering: %+v, %v; want a request", r, err)
			}
		})
	}})
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": 0}) // the child would hold at its wait
	if r := awaitEnd(t, h, run.ID); r.Status != starflowtype.RunCancelled {
		t.Fatalf("parent: %s", r.Status)
	}
	// The child is cancelled with the parent (or, when a runner had
	// claimed it already, asked to and ended at its next boundary).
	child := oneChild(t, h, run.ID)
	if !child.Status.Terminal() && !child.CancelRequested {
		t.Fatalf("parent cancelled, its child left %s/%s without a cancel request", child.Status, child.ClaimState)
	}
	awaitRun(t, h, child.ID, "cancelled", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunCancelled })
}

// cancelAtNodeStart is a store that cancels run (an operator's CancelRun)
// right after the node_start of step stepID: the cancel lands while the
// step enters its wait, before OnRunPaused.
type cancelAtNodeStart struct {
	*sqlitestore.Store
	stepID string
	once   sync.Once
	err    error
}

func (s *cancelAtNodeStart) OnNodeStart(ctx context.Context, p *state.NodeStartParams) error {
	if err := s.Store.OnNodeStart(ctx, p); err != nil {
		return err
	}
	if p.StepID == s.stepID {
		s.once.Do(func() { _, s.err = s.Store.CancelRun(ctx, &state.CancelRunParams{RunID: p.RunID}) })
	}
	return nil
}

// A cancel requested before the workflow_call paused its run: the pause
// is refused, no child is started, and the run ends cancelled.
func TestCancelBeforeWorkflowCallPausesStartsNoChild(t *testing.T) {
	t.Parallel()
	inner, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db"), Synchronous: sqlitestore.SynchronousNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	if err := inner.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := &cancelAtNodeStart{Store: inner, stepID: "call"}
	eng, err := starflow.New(starflow.Config{Store: st, Logger: quietLogger(),
		RunRetryMin: 10 * time.Millisecond, RunRetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: inner, eng: eng}
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": 1})
	if r := awaitEnd(t, h, run.ID); r.Status != starflowtype.RunCancelled {
		t.Fatalf("parent: %s %s", r.Status, r.Error)
	}
	if st.err != nil {
		t.Fatalf("CancelRun: %v", st.err)
	}
	if cs := childrenOf(t, h, run.ID); len(cs) != 0 {
		t.Fatalf("a run cancelled before its workflow_call paused started %d child(ren): %s %s", len(cs), cs[0].ID, cs[0].Status)
	}
	if n := countEvents(h.events(run.ID), starflowtype.EventRunPaused, ""); n != 0 {
		t.Errorf("run_paused events: %d, want none (the pause was refused)", n)
	}
	if ws := h.waits(run.ID); len(ws) != 0 {
		t.Errorf("waits registered: %+v", ws)
	}
}
