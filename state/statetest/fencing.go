package statetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// fencedWrite is one runner write method, called on the run prepared by
// testFencing (its step "s1" is running) with the given lease.
type fencedWrite struct {
	name string
	call func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error
	// setup, when set, prepares the run with the current lease before the
	// calls (ParkRun needs a paused run).
	setup func(h *harness, r *starflowtype.Run, l starflowtype.Lease)
	// durable: the write needs a durable store; an adapter that keeps
	// nothing refuses it with state.ErrNotImplemented.
	durable bool
}

// fencedWrites lists every Adapter method whose params carry a Lease.
// testFencing fails when a method is missing here, so keep it complete.
var fencedWrites = []fencedWrite{
	{"OnRunStart", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: r.ID, Lease: l})
		return err
	}, nil, false},
	{"RefreshLease", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.RefreshLease(h.ctx(), &state.RefreshLeaseParams{RunID: r.ID, Lease: l, LeaseTTL: time.Hour})
		return err
	}, nil, false},
	{"OnNodeStart", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: stepKey(r, "", "s2"), Lease: l, Kind: "context_set", Try: 1})
	}, nil, false},
	{"OnNodeRetry", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: stepKey(r, "", "s1"), Lease: l, Try: 1, Error: "boom", Backoff: time.Second})
	}, nil, false},
	{"OnNodeComplete", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: stepKey(r, "", "s1"), Lease: l, Try: 1,
			Output: json.RawMessage(`{"ok":true}`), Context: json.RawMessage(`{"k":1}`)})
	}, nil, false},
	{"OnNodeComplete/WithStart", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: stepKey(r, "", "s4"), Lease: l, Try: 1,
			Kind: "context_set", WithStart: true, Output: json.RawMessage(`1`), Context: json.RawMessage(`{"k":2}`)})
	}, nil, false},
	{"OnNodeError", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: stepKey(r, "", "s1"), Lease: l, Kind: "context_set", Try: 1, Error: "boom"})
	}, nil, false},
	{"OnNodeSkipped", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: stepKey(r, "", "s3"), Lease: l, Kind: "context_set", Reason: "when was false"})
	}, nil, false},
	{"RecordPhaseIfChanged", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.RecordPhaseIfChanged(h.ctx(), &state.RecordPhaseParams{RunID: r.ID, Lease: l, Phase: "shipping"})
	}, nil, false},
	{"OnRunComplete", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: r.ID, Lease: l, Output: json.RawMessage(`{"done":true}`)})
		return err
	}, nil, false},
	{"OnRunError/Retry", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom", Retry: true, Backoff: time.Second})
		return err
	}, nil, false},
	{"OnRunError/Fail", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom"})
		return err
	}, nil, false},
	{"OnRunCancelled", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.OnRunCancelled(h.ctx(), &state.RunCancelledParams{RunID: r.ID, Lease: l})
		return err
	}, nil, false},
	{"ClearLease", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: r.ID, Lease: l})
	}, nil, false},
	{"OnRunPaused", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.OnRunPaused(h.ctx(), &state.RunPausedParams{StepKey: stepKey(r, "", "s1"), Lease: l, Kind: "wait",
			Snapshot: json.RawMessage(`{"k":1}`), Phase: "waiting"})
	}, nil, true},
	{"RegisterWait", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.RegisterWait(h.ctx(), &state.RegisterWaitParams{StepKey: stepKey(r, "", "s1"), Lease: l,
			Kind: starflowtype.WaitSignal, Signal: "approved"})
		return err
	}, nil, true},
	{"ParkRun", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.ParkRun(h.ctx(), &state.ParkRunParams{RunID: r.ID, Lease: l})
		return err
	}, func(h *harness, r *starflowtype.Run, l starflowtype.Lease) {
		h.pause(stepKey(r, "", "s1"), l)
	}, true},
	{"SessionSet", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		_, err := h.a.SessionSet(h.ctx(), &state.SessionSetParams{SessionID: fenceSession, Key: fenceKey, Value: json.RawMessage(`1`), RunID: r.ID, Lease: l})
		return err
	}, nil, true},
	{"AbandonJob", func(h *harness, r *starflowtype.Run, l starflowtype.Lease) error {
		return h.a.AbandonJob(h.ctx(), &state.AbandonJobParams{StepKey: stepKey(r, "", "s1"), Lease: l})
	}, nil, true},
}

// testFencing: every runner write with a stale epoch, another runner's id
// or no lease returns ErrLeaseLost and writes nothing; the same write with
// the current lease succeeds (so the refusal is the fence's doing).
func (s *suite) testFencing(t *testing.T) {
	t.Parallel()
	for _, w := range fencedWrites {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			h := s.stored(t)

			// Epoch 1 is released and the run claimed again by the same
			// runner, so {runnerA, 1} is a genuinely stale lease.
			r := h.enqueue(nil)
			first := h.claimID(r.ID, runnerA)
			if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: r.ID, Lease: first.Lease()}); err != nil {
				t.Fatalf("ClearLease: %v", err)
			}
			run, cur := h.claimAndStart(r.ID, runnerA)
			if cur.Epoch <= first.LeaseEpoch {
				t.Fatalf("second claim has epoch %d, first had %d", cur.Epoch, first.LeaseEpoch)
			}
			h.nodeStart(stepKey(run, "", "s1"), cur, 1)
			if w.setup != nil {
				w.setup(h, run, cur)
			}

			for _, bad := range []struct {
				what  string
				lease starflowtype.Lease
			}{
				{"stale epoch", first.Lease()},
				{"future epoch", starflowtype.Lease{RunnerID: runnerA, Epoch: cur.Epoch + 1}},
				{"other runner", starflowtype.Lease{RunnerID: runnerB, Epoch: cur.Epoch}},
				{"no lease", starflowtype.Lease{}},
			} {
				before := h.snapshot(r.ID)
				err := w.call(h, run, bad.lease)
				wantErrIs(t, w.name+" with "+bad.what, err, starflowtype.ErrLeaseLost)
				sameSnapshot(t, w.name+" with "+bad.what, before, h.snapshot(r.ID))
			}

			if err := w.call(h, run, cur); err != nil {
				t.Errorf("%s with the current lease: %v", w.name, err)
			}
		})
	}

	t.Run("CoversEveryLeasedMethod", func(t *testing.T) {
		t.Parallel()
		covered := map[string]bool{}
		for _, w := range fencedWrites {
			name, _, _ := strings.Cut(w.name, "/")
			covered[name] = true
		}
		leaseType := reflect.TypeFor[starflowtype.Lease]()
		adapter := reflect.TypeFor[state.Adapter]()
		for i := range adapter.NumMethod() {
			m := adapter.Method(i)
			if m.Type.NumIn() < 2 || m.Type.In(1).Kind() != reflect.Pointer || m.Type.In(1).Elem().Kind() != reflect.Struct {
				continue
			}
			if f, ok := m.Type.In(1).Elem().FieldByName("Lease"); ok && f.Type == leaseType && !covered[m.Name] {
				t.Errorf("state.Adapter.%s takes a Lease but the fencing table does not test it", m.Name)
			}
		}
	})

	t.Run("UnknownRun", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		ghost := &starflowtype.Run{ID: "00000000-0000-0000-0000-000000000000", Attempt: 1}
		for _, w := range fencedWrites {
			err := w.call(h, ghost, starflowtype.Lease{RunnerID: runnerA, Epoch: 1})
			wantErrIs(t, w.name+" on a run that does not exist", err, starflowtype.ErrLeaseLost)
		}
	})
}
