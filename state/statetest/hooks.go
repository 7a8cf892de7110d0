package statetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// errHook is what a failing recorder hook returns.
var errHook = errors.New("statetest: hook refused the write")

// recorder is a TxHook that records every Change it sees, can be told to
// fail one operation, and, when writeRows is set, appends an outbox row
// per change through the hook's transaction (kind "run", payload
// {"op": …}).
type recorder struct {
	t         *testing.T
	writeRows bool

	mu      sync.Mutex
	changes []state.Change
	failOp  state.Op
}

func newRecorder(t *testing.T, writeRows bool) *recorder {
	return &recorder{t: t, writeRows: writeRows}
}

// hook is the state.TxHook.
func (r *recorder) hook(ctx context.Context, tx state.HookTx, ch *state.Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, *ch)
	if r.writeRows {
		row := &state.OutboxRow{RunID: ch.RunID, Kind: state.OutboxKindRun, Payload: []byte(fmt.Sprintf(`{"op":%q}`, ch.Op))}
		if err := tx.AppendOutbox(ctx, []*state.OutboxRow{row}); err != nil {
			return err
		}
	}
	if r.failOp == ch.Op {
		return errHook
	}
	return nil
}

func (r *recorder) setFail(op state.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failOp = op
}

// last returns the newest change, failing when there is none or it is not
// of op.
func (r *recorder) last(op state.Op) state.Change {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.changes) == 0 {
		r.t.Fatalf("no change recorded, want one of %s", op)
	}
	ch := r.changes[len(r.changes)-1]
	if ch.Op != op {
		r.t.Fatalf("last change is of %q, want %q", ch.Op, op)
	}
	return ch
}

// sameEvent checks a Change's event against the event as stored: the
// same id, type, step, attempt, time and payload bytes.
func sameEvent(t *testing.T, what string, i int, got, stored *starflowtype.Event) {
	t.Helper()
	if got.ID != stored.ID || got.Type != stored.Type || got.NodeID != stored.NodeID || got.RunID != stored.RunID ||
		got.Attempt != stored.Attempt || !got.CreatedAt.Equal(stored.CreatedAt) || string(got.Payload) != string(stored.Payload) {
		t.Errorf("%s: Change.Events[%d] = %+v (payload %s), stored %+v (payload %s)", what, i, got, got.Payload, stored, stored.Payload)
	}
}

// testHooks: a TxHook sees each write's Change, can veto the write, and can
// add rows that commit with it.
func (s *suite) testHooks(t *testing.T) {
	t.Parallel()

	t.Run("SeesChanges", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, false)
		h := s.stored(t, rec.hook)

		// checkRun: the change's Run is the run row as the write left it.
		checkRun := func(ch state.Change, id string) {
			t.Helper()
			equal(t, string(ch.Op)+" RunID", ch.RunID, id)
			if ch.Run == nil {
				t.Errorf("%s: Change.Run is nil", ch.Op)
				return
			}
			if got := h.getRun(id); !reflect.DeepEqual(ch.Run, got) {
				t.Errorf("%s: Change.Run is not the run after the write:\nchange %+v\nstored %+v", ch.Op, ch.Run, got)
			}
		}
		// checkEvents: the change's Events are the events the write appended.
		checkEvents := func(ch state.Change, id string, mark int64) {
			t.Helper()
			stored := h.eventsAfter(id, mark)
			if len(ch.Events) != len(stored) {
				t.Errorf("%s: Change.Events %v, stored %v", ch.Op, eventTypes(ch.Events), eventTypes(stored))
				return
			}
			for i := range stored {
				sameEvent(t, string(ch.Op), i, ch.Events[i], stored[i])
			}
		}

		if _, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{Name: "wf", Revision: "r1", Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if ch := rec.last("PutDefinition"); ch.Run != nil || ch.RunID != "" {
			t.Errorf("PutDefinition change names run %q (%v), want none", ch.RunID, ch.Run)
		}

		// A claim that finds nothing writes nothing, so no hook runs (a
		// mirror would otherwise add an outbox row per idle poll).
		if c := h.claim(runnerA); c != nil {
			t.Fatalf("claimed %+v from a store with no runs", c)
		}
		rec.last("PutDefinition")

		r := h.enqueue(nil)
		ch := rec.last("EnqueueRun")
		checkRun(ch, r.ID)
		equal(t, "EnqueueRun change status", ch.Run.Status, starflowtype.RunQueued)
		checkEvents(ch, r.ID, 0)
		wantEventTypes(t, ch.Events, starflowtype.EventRunQueued)

		mark := h.lastEventID(r.ID)
		c := h.claimID(r.ID, runnerA)
		ch = rec.last("ClaimRun")
		checkRun(ch, r.ID)
		equal(t, "ClaimRun change lease", ch.Run.Lease(), c.Lease())
		checkEvents(ch, r.ID, mark)
		wantEventTypes(t, ch.Events, starflowtype.EventRunClaimed)

		// A claim that starts its runs (the runner's): one Change of both
		// runs, their events in the order they were written, as stored.
		a, b := h.enqueue(nil), h.enqueue(nil)
		markA, markB := h.lastEventID(a.ID), h.lastEventID(b.ID)
		started, err := h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerB, LeaseTTL: leaseTTL, Limit: 2, Start: true})
		if err != nil || len(started) != 2 {
			t.Fatalf("ClaimRuns(Start) = %s, %v; want two runs", dump(started), err)
		}
		ch = rec.last("ClaimRun")
		if len(ch.Runs) != 2 || ch.Runs[0].ID != a.ID || ch.Runs[1].ID != b.ID {
			t.Errorf("ClaimRuns(Start) change runs = %s, want %s and %s", dump(ch.Runs), a.ID, b.ID)
		}
		stored := append(h.eventsAfter(a.ID, markA), h.eventsAfter(b.ID, markB)...)
		slices.SortFunc(stored, func(x, y *starflowtype.Event) int { return cmp.Compare(x.ID, y.ID) })
		if len(ch.Events) != 4 || len(stored) != 4 {
			t.Errorf("ClaimRuns(Start) Change.Events %v, stored %v; want two each", eventTypes(ch.Events), eventTypes(stored))
		} else {
			for i := range stored {
				sameEvent(t, "ClaimRuns(Start)", i, ch.Events[i], stored[i])
			}
		}

		mark = h.lastEventID(r.ID)
		l := c.Lease()
		if _, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: r.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("OnRunStart")
		checkRun(ch, r.ID)
		equal(t, "OnRunStart change status", ch.Run.Status, starflowtype.RunRunning)
		checkEvents(ch, r.ID, mark)

		k := stepKey(c, "fanout.lane_a", "reserve")
		mark = h.lastEventID(r.ID)
		h.nodeStart(k, l, 1)
		ch = rec.last("OnNodeStart")
		checkRun(ch, r.ID)
		checkEvents(ch, r.ID, mark)
		if len(ch.Steps) != 1 || !reflect.DeepEqual(ch.Steps[0], h.step(k)) {
			t.Errorf("OnNodeStart Change.Steps = %s, want the stored row %s", dump(ch.Steps), dump(h.step(k)))
		}

		mark = h.lastEventID(r.ID)
		h.nodeComplete(k, l, `{"id":"r-1"}`, `{"reservation":"r-1"}`)
		ch = rec.last("OnNodeComplete")
		checkRun(ch, r.ID)
		checkEvents(ch, r.ID, mark)
		wantEventTypes(t, ch.Events, starflowtype.EventNodeComplete)
		if len(ch.Steps) != 1 || !reflect.DeepEqual(ch.Steps[0], h.step(k)) {
			t.Errorf("OnNodeComplete Change.Steps = %s, want the stored row %s", dump(ch.Steps), dump(h.step(k)))
		} else {
			equal(t, "OnNodeComplete change step status", ch.Steps[0].Status, starflowtype.StepSucceeded)
		}

		// The other step writes: retry, error (of a started step and of one
		// that never started), skipped. Each Change carries the run and the
		// step row exactly as stored.
		checkStep := func(op state.Op, k state.StepKey, status starflowtype.StepStatus) {
			t.Helper()
			ch := rec.last(op)
			checkRun(ch, r.ID)
			checkEvents(ch, r.ID, mark)
			if len(ch.Steps) != 1 || !reflect.DeepEqual(ch.Steps[0], h.step(k)) {
				t.Errorf("%s Change.Steps = %s, want the stored row %s", op, dump(ch.Steps), dump(h.step(k)))
			} else {
				equal(t, string(op)+" change step status", ch.Steps[0].Status, status)
			}
		}
		k2 := stepKey(c, "", "flaky")
		h.nodeStart(k2, l, 1)
		mark = h.lastEventID(r.ID)
		if err := h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: k2, Lease: l, Try: 2, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		checkStep("OnNodeRetry", k2, starflowtype.StepRunning)
		mark = h.lastEventID(r.ID)
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k2, Lease: l, Kind: "noop", Try: 2, Error: "boom again"}); err != nil {
			t.Fatal(err)
		}
		checkStep("OnNodeError", k2, starflowtype.StepFailed)
		k3 := stepKey(c, "", "never_started")
		mark = h.lastEventID(r.ID)
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k3, Lease: l, Kind: "noop", Try: 1, Error: "when failed"}); err != nil {
			t.Fatal(err)
		}
		checkStep("OnNodeError", k3, starflowtype.StepFailed)
		k4 := stepKey(c, "", "skipped")
		mark = h.lastEventID(r.ID)
		if err := h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: k4, Lease: l, Kind: "noop", Reason: "when false"}); err != nil {
			t.Fatal(err)
		}
		checkStep("OnNodeSkipped", k4, starflowtype.StepSkipped)

		mark = h.lastEventID(r.ID)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: r.ID, Lease: l, Output: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("OnRunComplete")
		checkRun(ch, r.ID)
		equal(t, "OnRunComplete change status", ch.Run.Status, starflowtype.RunSucceeded)
		checkEvents(ch, r.ID, mark)
	})

	t.Run("ErrorRollsBack", func(t *testing.T) {
		t.Parallel()
		for _, w := range fencedWrites {
			op, _, _ := strings.Cut(w.name, "/")
			t.Run(w.name, func(t *testing.T) {
				t.Parallel()
				rec := newRecorder(t, false)
				h := s.stored(t, rec.hook)
				run, l := h.started(nil, runnerA)
				h.nodeStart(stepKey(run, "", "s1"), l, 1)
				if w.setup != nil {
					w.setup(h, run, l)
				}
				before := h.snapshot(run.ID)
				rec.setFail(state.Op(op))
				err := w.call(h, run, l)
				wantErrIs(t, w.name+" with a failing hook", err, errHook)
				if errors.Is(err, starflowtype.ErrLeaseLost) {
					t.Errorf("%s: a hook failure reads as ErrLeaseLost: %v", w.name, err)
				}
				sameSnapshot(t, w.name+" with a failing hook", before, h.snapshot(run.ID))
				rec.setFail("")
				if err := w.call(h, run, l); err != nil {
					t.Errorf("%s once the hook passes: %v", w.name, err)
				}
			})
		}

		t.Run("EnqueueRun", func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, false)
			h := s.stored(t, rec.hook)
			rec.setFail("EnqueueRun")
			_, err := h.a.EnqueueRun(h.ctx(), &state.EnqueueRunParams{ID: "5a1e3c55-0000-4000-8000-000000000001", WorkflowName: "wf"})
			wantErrIs(t, "EnqueueRun with a failing hook", err, errHook)
			_, err = h.a.GetRun(h.ctx(), &state.GetRunParams{ID: "5a1e3c55-0000-4000-8000-000000000001"})
			wantErrIs(t, "GetRun of the refused run", err, starflowtype.ErrNotFound)
			equal(t, "events of the refused run", len(h.events("5a1e3c55-0000-4000-8000-000000000001")), 0)
		})

		t.Run("ClaimRun", func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, false)
			h := s.stored(t, rec.hook)
			r := h.enqueue(nil)
			before := h.snapshot(r.ID)
			rec.setFail("ClaimRun")
			c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL})
			wantErrIs(t, "ClaimRun with a failing hook", err, errHook)
			if c != nil {
				t.Errorf("ClaimRun with a failing hook returned %+v", c)
			}
			sameSnapshot(t, "ClaimRun with a failing hook", before, h.snapshot(r.ID))
			rec.setFail("")
			equal(t, "epoch of the next claim", h.claimID(r.ID, runnerB).LeaseEpoch, 1)
		})

		t.Run("PutDefinition", func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, false)
			h := s.stored(t, rec.hook)
			rec.setFail("PutDefinition")
			_, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{Name: "wf", Revision: "r1", Spec: []byte(`{}`)})
			wantErrIs(t, "PutDefinition with a failing hook", err, errHook)
			_, err = h.a.GetDefinition(h.ctx(), &state.GetDefinitionParams{Name: "wf"})
			wantErrIs(t, "GetDefinition of the refused definition", err, starflowtype.ErrNotFound)
		})
	})

	t.Run("WritesCommitWithTheWrite", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, true)
		h := s.stored(t, rec.hook)
		ob, ok := h.a.(state.Outbox)
		if !ok {
			t.Skip("statetest: the adapter does not implement state.Outbox, so the rows a hook appends cannot be read back")
		}
		r := h.enqueue(nil)
		if _, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{Name: "wf", Revision: "r1", Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		rec.setFail("OnRunStart")
		c := h.claimID(r.ID, runnerA)
		_, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: r.ID, Lease: c.Lease()})
		wantErrIs(t, "OnRunStart with a failing hook", err, errHook)
		rec.setFail("")
		if err := h.a.RecordPhaseIfChanged(h.ctx(), &state.RecordPhaseParams{RunID: r.ID, Lease: c.Lease(), Phase: "p"}); err != nil {
			t.Fatal(err)
		}
		// The rows of committed writes are there, in commit order; the
		// refused OnRunStart's row went with its write.
		var ops []string
		if _, err := ob.DrainOutbox(h.ctx(), &state.DrainOutboxParams{}, func(_ context.Context, rows []*state.OutboxRow) ([]int64, error) {
			for _, row := range rows {
				var p struct{ Op string }
				if err := json.Unmarshal(row.Payload, &p); err != nil {
					return nil, err
				}
				ops = append(ops, p.Op)
			}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		equal(t, "ops of the rows the hook appended", dump(ops), dump([]string{"EnqueueRun", "PutDefinition", "ClaimRun", "RecordPhaseIfChanged"}))
	})
}
