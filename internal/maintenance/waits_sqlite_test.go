package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// openSQLite opens a migrated SQLite file store in a temporary directory.
func openSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "m.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// parkedWait enqueues and claims a run, enters a durable wait at step
// "w" with the three commit boundaries (OnRunPaused, RegisterWait,
// ParkRun) and returns the run id and the registered wait.
func parkedWait(t *testing.T, s state.Adapter, reg state.RegisterWaitParams) (string, *starflowtype.Wait) {
	t.Helper()
	ctx := context.Background()
	def, err := s.PutDefinition(ctx, &state.PutDefinitionParams{
		WorkspaceID: state.DefaultWorkspace, Name: "waiter", Revision: "r1",
		Spec: json.RawMessage(`{"name":"waiter"}`), Source: "name: waiter",
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{
		WorkspaceID: state.DefaultWorkspace, Env: state.DefaultEnv, DefinitionID: def.ID,
		WorkflowName: def.Name, WorkflowRevision: def.Revision, RecoveryMode: starflowtype.RecoveryResume,
		TriggerType: starflowtype.TriggerAPI, Input: json.RawMessage(`{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "test-runner", LeaseTTL: time.Minute, RunID: run.ID})
	if err != nil || claimed == nil {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	lease := starflowtype.Lease{RunnerID: "test-runner", Epoch: claimed.LeaseEpoch}
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	key := state.StepKey{RunID: run.ID, Attempt: claimed.Attempt, StepID: "w"}
	if err := s.OnNodeStart(ctx, &state.NodeStartParams{StepKey: key, Lease: lease, Kind: "wait", Try: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.OnRunPaused(ctx, &state.RunPausedParams{StepKey: key, Lease: lease, Kind: "wait", Snapshot: json.RawMessage(`{"variables":{}}`)}); err != nil {
		t.Fatal(err)
	}
	reg.StepKey, reg.Lease, reg.WorkspaceID = key, lease, state.DefaultWorkspace
	w, err := s.RegisterWait(ctx, &reg)
	if err != nil {
		t.Fatal(err)
	}
	parked, err := s.ParkRun(ctx, &state.ParkRunParams{RunID: run.ID, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if parked.ClaimState != starflowtype.ClaimParked || parked.LeasedBy != "" {
		t.Fatalf("after ParkRun: claim_state %s, leased_by %q; want parked, no lease", parked.ClaimState, parked.LeasedBy)
	}
	return run.ID, w
}

func getRun(t *testing.T, s state.Adapter, id string) *starflowtype.Run {
	t.Helper()
	r, err := s.GetRun(context.Background(), &state.GetRunParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func countEvents(t *testing.T, s state.Adapter, runID string, typ starflowtype.EventType) int {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), &state.ListEventsParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestTimerPollerSQLite: a due timer and a passed timeout fire once each
// (woken / timed_out, one wake_received, run re-queued, OnRequeue called);
// a timer not yet due is left alone; a second pass changes nothing.
func TestTimerPollerSQLite(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	due, _ := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Second)})
	timeout, _ := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitSignal, Signal: "go", ExpiresAt: time.Now().Add(-time.Second)})
	later, _ := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeIn: time.Hour})

	var nudges atomic.Int32
	p := NewTimerPoller(s, TimerConfig{Logger: quiet(), OnRequeue: func() { nudges.Add(1) }})
	fired, err := p.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[string]*starflowtype.Wait{}
	for _, w := range fired {
		byRun[w.RunID] = w
	}
	if len(fired) != 2 || byRun[due] == nil || byRun[timeout] == nil {
		t.Fatalf("fired %d waits %+v; want the due timer and the passed timeout", len(fired), fired)
	}
	if byRun[due].Status != starflowtype.WaitWoken || byRun[timeout].Status != starflowtype.WaitTimedOut {
		t.Fatalf("statuses: timer %s, timeout %s; want woken, timed_out", byRun[due].Status, byRun[timeout].Status)
	}
	if nudges.Load() != 1 {
		t.Fatalf("OnRequeue called %d times, want 1", nudges.Load())
	}
	for _, id := range []string{due, timeout} {
		if r := getRun(t, s, id); r.ClaimState != starflowtype.ClaimQueued {
			t.Errorf("run %s claim_state %s after its wait fired, want queued", id, r.ClaimState)
		}
		if n := countEvents(t, s, id, starflowtype.EventWakeReceived); n != 1 {
			t.Errorf("run %s has %d wake_received events, want 1", id, n)
		}
	}
	if r := getRun(t, s, later); r.ClaimState != starflowtype.ClaimParked {
		t.Errorf("run with a timer an hour away: claim_state %s, want parked", r.ClaimState)
	}
	again, err := p.Pass(context.Background())
	if err != nil || len(again) != 0 || nudges.Load() != 1 {
		t.Fatalf("second pass fired %d (%v), nudges %d; want nothing", len(again), err, nudges.Load())
	}
}

// TestTimerPollerStartFiresOverdueAtOnce: the pass at Start fires a timer
// that fell due while nothing ran, without waiting for the interval.
func TestTimerPollerStartFiresOverdueAtOnce(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	id, _ := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Minute)})
	nudged := make(chan struct{}, 1)
	p := NewTimerPoller(s, TimerConfig{Interval: time.Hour, Logger: quiet(), OnRequeue: func() { nudged <- struct{}{} }})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	select {
	case <-nudged:
	case <-time.After(30 * time.Second):
		t.Fatal("the pass at Start did not fire the overdue timer")
	}
	if r := getRun(t, s, id); r.ClaimState != starflowtype.ClaimQueued {
		t.Fatalf("claim_state %s, want queued", r.ClaimState)
	}
}

// TestNotifyRetrierSQLite: a failing endpoint is retried with backoff
// until it accepts; then the wait is delivered and no longer listed.
func TestNotifyRetrierSQLite(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	_, w := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitSignal, Signal: "approve",
		Notify: json.RawMessage(`{"url":"http://127.0.0.1:1/hook"}`)})
	var tries atomic.Int32
	n, err := NewNotifyRetrier(s, NotifyConfig{
		RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, Logger: quiet(),
		Deliver: func(_ context.Context, got *starflowtype.Wait) error {
			if got.ID != w.ID {
				t.Errorf("delivered wait %s, want %s", got.ID, w.ID)
			}
			if tries.Add(1) < 3 {
				return errors.New("endpoint down")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for tries.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d tries within 30 s", tries.Load())
		}
		if _, err := n.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, err := s.GetWait(context.Background(), &state.GetWaitParams{ID: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.NotifiedAt.IsZero() || got.NotifyTries != 2 {
		t.Fatalf("after delivery: notified_at %v, notify_tries %d; want set, 2 failed tries", got.NotifiedAt, got.NotifyTries)
	}
	res, err := n.Pass(context.Background())
	if err != nil || res != (NotifyResult{}) || tries.Load() != 3 {
		t.Fatalf("pass after delivery: %+v %v, %d tries; want nothing", res, err, tries.Load())
	}
}

// TestSessionGCSQLite: an expired keep_until variable is removed, a live
// one stays.
func TestSessionGCSQLite(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	ctx := context.Background()
	// Session variables are written under a run's lease: use a parked run's
	// successor claim.
	runID, _ := parkedWait(t, s, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Second)})
	if _, err := NewTimerPoller(s, TimerConfig{Logger: quiet()}).Pass(ctx); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "gc-runner", LeaseTTL: time.Minute, RunID: runID})
	if err != nil || claimed == nil {
		t.Fatalf("re-claim: %v %v", claimed, err)
	}
	lease := starflowtype.Lease{RunnerID: "gc-runner", Epoch: claimed.LeaseEpoch}
	for key, until := range map[string]time.Time{"old": time.Now().Add(-time.Second), "live": time.Now().Add(time.Hour)} {
		if _, err := s.SessionSet(ctx, &state.SessionSetParams{WorkspaceID: state.DefaultWorkspace, SessionID: "s1", Key: key,
			Value: json.RawMessage(`1`), RunID: runID, Lease: lease, KeepUntil: until}); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := NewSessionGC(s, SessionGCConfig{Logger: quiet()}).Pass(ctx)
	if err != nil || removed != 1 {
		t.Fatalf("removed %d (%v), want 1", removed, err)
	}
	if _, err := s.SessionGet(ctx, &state.SessionGetParams{WorkspaceID: state.DefaultWorkspace, SessionID: "s1", Key: "live"}); err != nil {
		t.Fatalf("live variable: %v", err)
	}
}
