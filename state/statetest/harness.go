package statetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Names and durations the cases share.
const (
	runnerA  = "runner-a"
	runnerB  = "runner-b"
	leaseTTL = 30 * time.Second
	// clockSlack bounds how far apart two database-clock readings taken
	// by one statement (or by the test and the database on one host) may
	// be.
	clockSlack = 2 * time.Second
	// waitLimit bounds every wait for a time-based condition (a delay or
	// backoff running out).
	waitLimit = 10 * time.Second
)

// harness is one adapter under test and the helpers the cases share. Every
// helper fails the test at once on an unexpected error.
type harness struct {
	t    *testing.T
	a    state.Adapter
	caps state.Capabilities
}

func (h *harness) ctx() context.Context { return h.t.Context() }

// enqueue enqueues a run (workflow "wf" unless p names one).
func (h *harness) enqueue(p *state.EnqueueRunParams) *starflowtype.Run {
	h.t.Helper()
	if p == nil {
		p = &state.EnqueueRunParams{}
	}
	if p.WorkflowName == "" {
		p.WorkflowName = "wf"
	}
	r, err := h.a.EnqueueRun(h.ctx(), p)
	if err != nil {
		h.t.Fatalf("EnqueueRun: %v", err)
	}
	if r == nil || r.ID == "" {
		h.t.Fatalf("EnqueueRun returned %+v, want a run with an id", r)
	}
	return r
}

// claim claims for runner with pools; nil when nothing is claimable.
func (h *harness) claim(runner string, pools ...string) *starflowtype.Run {
	h.t.Helper()
	r, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runner, Pools: pools, LeaseTTL: leaseTTL})
	if err != nil {
		h.t.Fatalf("ClaimRun(%s): %v", runner, err)
	}
	return r
}

// claimID claims for runner and requires the claimed run to be id.
func (h *harness) claimID(id, runner string, pools ...string) *starflowtype.Run {
	h.t.Helper()
	r := h.claim(runner, pools...)
	if r == nil {
		h.t.Fatalf("ClaimRun(%s) = nil, want run %s", runner, id)
	}
	if r.ID != id {
		h.t.Fatalf("ClaimRun(%s) claimed %s, want %s", runner, r.ID, id)
	}
	return r
}

// started enqueues a run, claims it for runner and starts it; it returns
// the run after OnRunStart and the lease.
func (h *harness) started(p *state.EnqueueRunParams, runner string) (*starflowtype.Run, starflowtype.Lease) {
	h.t.Helper()
	r := h.enqueue(p)
	return h.claimAndStart(r.ID, runner)
}

// claimAndStart claims run id for runner and calls OnRunStart.
func (h *harness) claimAndStart(id, runner string) (*starflowtype.Run, starflowtype.Lease) {
	h.t.Helper()
	c := h.claimID(id, runner)
	l := c.Lease()
	r, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: id, Lease: l})
	if err != nil {
		h.t.Fatalf("OnRunStart: %v", err)
	}
	return r, l
}

// stepKey names step id in the root scope of the run's current attempt.
func stepKey(r *starflowtype.Run, scope, id string) state.StepKey {
	return state.StepKey{RunID: r.ID, Attempt: r.Attempt, ScopePath: scope, StepID: id}
}

// nodeStart opens step k with try.
func (h *harness) nodeStart(k state.StepKey, l starflowtype.Lease, try int) {
	h.t.Helper()
	if err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: l, Kind: "context_set", Try: try}); err != nil {
		h.t.Fatalf("OnNodeStart(%s/%s try %d): %v", k.ScopePath, k.StepID, try, err)
	}
}

// nodeComplete completes step k (try 1) with output and context delta.
func (h *harness) nodeComplete(k state.StepKey, l starflowtype.Lease, output, delta string) {
	h.t.Helper()
	err := h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: k, Lease: l, Try: 1,
		Output: json.RawMessage(output), Context: json.RawMessage(delta)})
	if err != nil {
		h.t.Fatalf("OnNodeComplete(%s/%s): %v", k.ScopePath, k.StepID, err)
	}
}

// runStep starts and completes step k in one try.
func (h *harness) runStep(k state.StepKey, l starflowtype.Lease, output, delta string) {
	h.t.Helper()
	h.nodeStart(k, l, 1)
	h.nodeComplete(k, l, output, delta)
}

// getRun reads run id.
func (h *harness) getRun(id string) *starflowtype.Run {
	h.t.Helper()
	r, err := h.a.GetRun(h.ctx(), &state.GetRunParams{ID: id})
	if err != nil {
		h.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

// events lists every event of run id.
func (h *harness) events(id string) []*starflowtype.Event {
	h.t.Helper()
	evs, err := h.a.ListEvents(h.ctx(), &state.ListEventsParams{RunID: id})
	if err != nil {
		h.t.Fatalf("ListEvents(%s): %v", id, err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			h.t.Fatalf("ListEvents(%s): ids not increasing: %d after %d", id, evs[i].ID, evs[i-1].ID)
		}
	}
	return evs
}

// eventsAfter lists the events of run id appended after event afterID.
func (h *harness) eventsAfter(id string, afterID int64) []*starflowtype.Event {
	h.t.Helper()
	evs, err := h.a.ListEvents(h.ctx(), &state.ListEventsParams{RunID: id, AfterID: afterID})
	if err != nil {
		h.t.Fatalf("ListEvents(%s after %d): %v", id, afterID, err)
	}
	return evs
}

// lastEventID is the id of run id's newest event (0 when none).
func (h *harness) lastEventID(id string) int64 {
	h.t.Helper()
	evs := h.events(id)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].ID
}

// steps lists run id's step rows of attempt (0 = all).
func (h *harness) steps(id string, attempt int) []*starflowtype.Step {
	h.t.Helper()
	st, err := h.a.ListSteps(h.ctx(), &state.ListStepsParams{RunID: id, Attempt: attempt})
	if err != nil {
		h.t.Fatalf("ListSteps(%s, %d): %v", id, attempt, err)
	}
	return st
}

// step finds the row of k, failing when absent.
func (h *harness) step(k state.StepKey) *starflowtype.Step {
	h.t.Helper()
	for _, st := range h.steps(k.RunID, k.Attempt) {
		if st.ScopePath == k.ScopePath && st.StepID == k.StepID {
			return st
		}
	}
	h.t.Fatalf("no step row for %+v", k)
	return nil
}

// checkpoints lists run id's checkpoints of attempt (0 = all).
func (h *harness) checkpoints(id string, attempt int) []*starflowtype.Checkpoint {
	h.t.Helper()
	cps, err := h.a.ListCheckpoints(h.ctx(), &state.ListCheckpointsParams{RunID: id, Attempt: attempt})
	if err != nil {
		h.t.Fatalf("ListCheckpoints(%s, %d): %v", id, attempt, err)
	}
	return cps
}

// snapshot is everything the cold tier holds about one run.
type snapshot struct {
	Run         *starflowtype.Run
	Events      []*starflowtype.Event
	Steps       []*starflowtype.Step
	Checkpoints []*starflowtype.Checkpoint
	Waits       []*starflowtype.Wait
	// Var is the session variable the fencing table writes
	// (fenceSession/fenceKey), nil when absent.
	Var *starflowtype.SessionVar
}

// The session variable the fencing table's SessionSet writes.
const (
	fenceSession = "sess"
	fenceKey     = "k"
)

func (h *harness) snapshot(id string) snapshot {
	h.t.Helper()
	waits, err := h.a.ListWaits(h.ctx(), &state.ListWaitsParams{RunID: id, Limit: 1000})
	if err != nil {
		h.t.Fatalf("ListWaits(%s): %v", id, err)
	}
	v, err := h.a.SessionGet(h.ctx(), &state.SessionGetParams{SessionID: fenceSession, Key: fenceKey})
	if err != nil && !errors.Is(err, starflowtype.ErrNotFound) {
		h.t.Fatalf("SessionGet: %v", err)
	}
	return snapshot{Run: h.getRun(id), Events: h.events(id), Steps: h.steps(id, 0), Checkpoints: h.checkpoints(id, 0),
		Waits: waits, Var: v}
}

// sameSnapshot fails when anything about the run changed between a and b.
func sameSnapshot(t *testing.T, what string, a, b snapshot) {
	t.Helper()
	if !reflect.DeepEqual(a.Run, b.Run) {
		t.Errorf("%s changed the run row:\nbefore %+v\nafter  %+v", what, a.Run, b.Run)
	}
	if len(a.Events) != len(b.Events) {
		t.Errorf("%s changed the events: %d before, %d after (%v)", what, len(a.Events), len(b.Events), eventTypes(b.Events))
	}
	if !reflect.DeepEqual(a.Steps, b.Steps) {
		t.Errorf("%s changed the step rows:\nbefore %s\nafter  %s", what, dump(a.Steps), dump(b.Steps))
	}
	if !reflect.DeepEqual(a.Checkpoints, b.Checkpoints) {
		t.Errorf("%s changed the checkpoints:\nbefore %s\nafter  %s", what, dump(a.Checkpoints), dump(b.Checkpoints))
	}
	if !reflect.DeepEqual(a.Waits, b.Waits) {
		t.Errorf("%s changed the waits:\nbefore %s\nafter  %s", what, dump(a.Waits), dump(b.Waits))
	}
	if !reflect.DeepEqual(a.Var, b.Var) {
		t.Errorf("%s changed session variable %s/%s:\nbefore %s\nafter  %s", what, fenceSession, fenceKey, dump(a.Var), dump(b.Var))
	}
}

// eventTypes lists the types of evs in order.
func eventTypes(evs []*starflowtype.Event) []starflowtype.EventType {
	out := make([]starflowtype.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// wantEventTypes fails unless evs have exactly the types want, in order.
func wantEventTypes(t *testing.T, evs []*starflowtype.Event, want ...starflowtype.EventType) {
	t.Helper()
	if got := eventTypes(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("event types = %v, want %v", got, want)
	}
}

// payloadField decodes e's payload as a JSON object and returns field key
// (nil when absent).
func payloadField(t *testing.T, e *starflowtype.Event, key string) any {
	t.Helper()
	if len(e.Payload) == 0 {
		t.Errorf("%s event has no payload, want one with %q", e.Type, key)
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Errorf("%s event payload %s is not a JSON object: %v", e.Type, e.Payload, err)
		return nil
	}
	return m[key]
}

// wantTry fails unless e's payload has "try": try.
func wantTry(t *testing.T, e *starflowtype.Event, try int) {
	t.Helper()
	if got, ok := payloadField(t, e, "try").(float64); !ok || int(got) != try {
		t.Errorf("%s event payload %s: try = %v, want %d", e.Type, e.Payload, payloadField(t, e, "try"), try)
	}
}

// jsonEqual fails unless got and want hold the same JSON value (stores
// may reformat JSON, as PostgreSQL jsonb does).
func jsonEqual(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s = %q: not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		panic(fmt.Sprintf("statetest: bad wanted JSON %q: %v", want, err))
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// wantErrIs fails unless errors.Is(err, target).
func wantErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want errors.Is(err, %v)", what, err, target)
	}
}

// equal fails unless got == want.
func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// near fails unless got is within slack of want.
func near(t *testing.T, what string, got, want time.Time, slack time.Duration) {
	t.Helper()
	if got.IsZero() {
		t.Errorf("%s is not set, want about %v", what, want)
		return
	}
	if d := got.Sub(want); d < -slack || d > slack {
		t.Errorf("%s = %v, want %v ± %v (off by %v)", what, got, want, slack, d)
	}
}

// eventually polls cond until it is true, failing after waitLimit. It is
// for conditions that depend on the database clock passing a time the
// adapter chose (a delay, a backoff), which no signal announces.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dump renders v as JSON for failure messages.
func dump(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return b.String()
}
