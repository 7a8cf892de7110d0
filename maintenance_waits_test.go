package starflow_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// parkWait takes a queued run of a stored definition through the three
// commit boundaries of a durable wait at step "w" (as the engine does)
// and returns the run id and the wait.
func parkWait(t *testing.T, s state.Adapter, reg state.RegisterWaitParams) (string, *starflowtype.Wait) {
	t.Helper()
	ctx := context.Background()
	def, err := s.PutDefinition(ctx, &state.PutDefinitionParams{
		WorkspaceID: state.DefaultWorkspace, Name: "parked", Revision: "r1",
		Spec: json.RawMessage(`{"name":"parked"}`), Source: "name: parked",
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{
		WorkspaceID: state.DefaultWorkspace, Env: state.DefaultEnv, DefinitionID: def.ID, WorkflowName: def.Name,
		WorkflowRevision: def.Revision, RecoveryMode: starflowtype.RecoveryResume, TriggerType: starflowtype.TriggerAPI,
		Input: json.RawMessage(`{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "t", LeaseTTL: time.Minute, RunID: run.ID})
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	lease := starflowtype.Lease{RunnerID: "t", Epoch: c.LeaseEpoch}
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	key := state.StepKey{RunID: run.ID, Attempt: c.Attempt, StepID: "w"}
	if err := s.OnNodeStart(ctx, &state.NodeStartParams{StepKey: key, Lease: lease, Kind: "wait", Try: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.OnRunPaused(ctx, &state.RunPausedParams{StepKey: key, Lease: lease, Kind: "wait", Snapshot: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	reg.StepKey, reg.Lease, reg.WorkspaceID = key, lease, state.DefaultWorkspace
	w, err := s.RegisterWait(ctx, &reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ParkRun(ctx, &state.ParkRunParams{RunID: run.ID, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	return run.ID, w
}

// TestMaintenanceRunsWaitPasses: with Config.Maintenance, Start runs the
// timer poller at once (a timer that fell due while nothing ran fires
// without waiting for the interval) and the notify retrier delivers a
// registered wait's notify through WaitMaintenance.Deliver, once.
func TestMaintenanceRunsWaitPasses(t *testing.T) {
	t.Parallel()
	var delivered atomic.Int32
	var deliveredID atomic.Value
	h := newHarness(t, starflow.Config{NoRunner: true, Maintenance: true, WaitMaintenance: starflow.WaitMaintenanceConfig{
		TimerInterval: time.Hour, NotifyInterval: 20 * time.Millisecond, SessionGCInterval: time.Hour,
		Deliver: func(_ context.Context, w *starflowtype.Wait) error {
			deliveredID.Store(w.ID)
			delivered.Add(1)
			return nil
		},
	}})
	overdue, _ := parkWait(t, h.store, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Minute)})
	_, notified := parkWait(t, h.store, state.RegisterWaitParams{Kind: starflowtype.WaitSignal, Signal: "go",
		Notify: json.RawMessage(`{"url":"http://127.0.0.1:1/"}`)})
	h.start()

	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := h.store.GetRun(ctx, &state.GetRunParams{ID: overdue})
		if err != nil {
			t.Fatal(err)
		}
		w, err := h.store.GetWait(ctx, &state.GetWaitParams{ID: notified.ID})
		if err != nil {
			t.Fatal(err)
		}
		if r.ClaimState == starflowtype.ClaimQueued && !w.NotifiedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: overdue run %s (want queued); notify delivered at %v (want set)", r.ClaimState, w.NotifiedAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Delivered once: later passes no longer list it.
	time.Sleep(100 * time.Millisecond)
	if n := delivered.Load(); n != 1 || deliveredID.Load() != notified.ID {
		t.Fatalf("%d deliveries (last %v), want 1 of wait %s", n, deliveredID.Load(), notified.ID)
	}
}

// TestFireDueWaitsAndCollectSessionVarsOnDemand: the one-pass calls work
// without Start.
func TestFireDueWaitsAndCollectSessionVarsOnDemand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{NoRunner: true})
	ctx := context.Background()
	id, w := parkWait(t, h.store, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Second)})
	fired, err := h.eng.FireDueWaits(ctx)
	if err != nil || len(fired) != 1 || fired[0].ID != w.ID || fired[0].Status != starflowtype.WaitWoken {
		t.Fatalf("FireDueWaits: %+v %v; want wait %s woken", fired, err, w.ID)
	}
	c, err := h.store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "t2", LeaseTTL: time.Minute, RunID: id})
	if err != nil || c == nil {
		t.Fatalf("the woken run is not claimable: %v %v", c, err)
	}
	if _, err := h.store.SessionSet(ctx, &state.SessionSetParams{WorkspaceID: state.DefaultWorkspace, SessionID: "s", Key: "k",
		Value: json.RawMessage(`"v"`), RunID: id, Lease: starflowtype.Lease{RunnerID: "t2", Epoch: c.LeaseEpoch},
		KeepUntil: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	n, err := h.eng.CollectSessionVars(ctx)
	if err != nil || n != 1 {
		t.Fatalf("CollectSessionVars removed %d (%v), want 1", n, err)
	}
}
