package statetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// wantLeaseLost fails unless every runner write with lease l is refused
// with ErrLeaseLost and changes nothing.
func (h *harness) wantLeaseLost(what string, r *starflowtype.Run, l starflowtype.Lease) {
	h.t.Helper()
	for _, w := range fencedWrites {
		before := h.snapshot(r.ID)
		err := w.call(h, r, l)
		wantErrIs(h.t, what+": "+w.name, err, starflowtype.ErrLeaseLost)
		sameSnapshot(h.t, what+": "+w.name, before, h.snapshot(r.ID))
	}
}

// wantLeaseCleared fails unless r holds no lease.
func wantLeaseCleared(t *testing.T, r *starflowtype.Run) {
	t.Helper()
	if r.LeasedBy != "" || !r.LeaseUntil.IsZero() {
		t.Errorf("lease not cleared: leased_by %q, lease_until %v", r.LeasedBy, r.LeaseUntil)
	}
}

// testRunComplete: OnRunComplete ends the run as succeeded and retires its
// lease.
func (s *suite) testRunComplete(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	run, l := h.started(nil, runnerA)
	h.runStep(stepKey(run, "", "a"), l, `{"x":1}`, `{"x":1}`)
	mark := h.lastEventID(run.ID)

	ret, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l, Output: json.RawMessage(`{"order":"o-1","total":42.5}`)})
	if err != nil {
		t.Fatalf("OnRunComplete: %v", err)
	}
	got := h.getRun(run.ID)
	if ret == nil || ret.Status != got.Status || ret.UpdatedAt != got.UpdatedAt {
		t.Errorf("OnRunComplete returned %+v, GetRun %+v", ret, got)
	}
	equal(t, "status", got.Status, starflowtype.RunSucceeded)
	equal(t, "claim_state", got.ClaimState, starflowtype.ClaimComplete)
	jsonEqual(t, "output", got.Output, `{"order":"o-1","total":42.5}`)
	wantLeaseCleared(t, got)
	equal(t, "lease_epoch (kept for the record)", got.LeaseEpoch, l.Epoch)
	if got.CompletedAt.IsZero() || got.CompletedAt.Before(got.StartedAt) {
		t.Errorf("completed_at %v, started_at %v", got.CompletedAt, got.StartedAt)
	}
	if got.DurationMS < 0 {
		t.Errorf("duration_ms = %d", got.DurationMS)
	}
	if len(got.Checkpoint) != 0 {
		t.Errorf("checkpoint_json = %s, want NULL at the end", got.Checkpoint)
	}
	equal(t, "error", got.Error, "")
	wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventRunSucceeded)

	h.wantLeaseLost("after OnRunComplete", got, l)
	if c := h.claim(runnerB); c != nil {
		t.Errorf("a succeeded run was claimed: %+v", c)
	}
}

// testRunError: OnRunError re-queues with a backoff, dead-letters, fails
// or holds the run according to Retry, the attempts left and the recovery
// mode.
func (s *suite) testRunError(t *testing.T) {
	t.Parallel()

	t.Run("RetryRequeues", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		mark := h.lastEventID(run.ID)
		const backoff = time.Hour
		got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "inventory 503", Retry: true, Backoff: backoff})
		if err != nil {
			t.Fatalf("OnRunError: %v", err)
		}
		equal(t, "status", got.Status, starflowtype.RunInterrupted)
		equal(t, "claim_state", got.ClaimState, starflowtype.ClaimQueued)
		equal(t, "attempt", got.Attempt, 2)
		equal(t, "error", got.Error, "inventory 503")
		equal(t, "dead_lettered", got.DeadLettered, false)
		wantLeaseCleared(t, got)
		near(t, "available_at", got.AvailableAt, got.UpdatedAt.Add(backoff), clockSlack)
		if !got.AvailableAt.After(time.Now().Add(backoff / 2)) {
			t.Errorf("available_at %v is not about %v in the future", got.AvailableAt, backoff)
		}
		wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventRunInterrupted)
		if c := h.claim(runnerB); c != nil {
			t.Errorf("claimed during the backoff: %+v", c)
		}
		h.wantLeaseLost("after a retry", got, l)
	})

	t.Run("RetryClaimableAfterBackoff", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		h.runStep(stepKey(run, "", "a"), l, `1`, `{}`)
		got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "timeout", Retry: true, Backoff: 300 * time.Millisecond})
		if err != nil {
			t.Fatalf("OnRunError: %v", err)
		}
		var c *starflowtype.Run
		eventually(t, "the re-queued run claimable", func() bool {
			c = h.claim(runnerB)
			return c != nil
		})
		equal(t, "claimed", c.ID, run.ID)
		if c.UpdatedAt.Before(got.AvailableAt) {
			t.Errorf("claimed at %v (database clock), before available_at %v", c.UpdatedAt, got.AvailableAt)
		}
		equal(t, "lease_epoch", c.LeaseEpoch, l.Epoch+1)
		equal(t, "attempt", c.Attempt, 2)
		equal(t, "claim_attempts", c.ClaimAttempts, 2)
		equal(t, "leased_by", c.LeasedBy, runnerB)

		started, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()})
		if err != nil {
			t.Fatalf("OnRunStart of attempt 2: %v", err)
		}
		equal(t, "status of attempt 2", started.Status, starflowtype.RunRunning)
		h.runStep(stepKey(started, "", "a"), c.Lease(), `2`, `{}`)
		equal(t, "checkpoints of attempt 1", len(h.checkpoints(run.ID, 1)), 1)
		equal(t, "checkpoints of attempt 2", len(h.checkpoints(run.ID, 2)), 1)
		h.wantLeaseLost("attempt 1's lease in attempt 2", started, l)
	})

	t.Run("RetryExhaustedDeadLetters", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(&state.EnqueueRunParams{MaxAttempts: 2}, runnerA)
		// Attempt 1 fails and is retried; attempt 2 fails with no attempts left.
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "first", Retry: true}); err != nil {
			t.Fatalf("OnRunError of attempt 1: %v", err)
		}
		run, l = h.claimAndStart(run.ID, runnerA)
		equal(t, "attempt", run.Attempt, 2)
		mark := h.lastEventID(run.ID)
		got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "second", Retry: true, Backoff: time.Second})
		if err != nil {
			t.Fatalf("OnRunError of attempt 2: %v", err)
		}
		equal(t, "status", got.Status, starflowtype.RunFailed)
		equal(t, "claim_state", got.ClaimState, starflowtype.ClaimFailed)
		equal(t, "dead_lettered", got.DeadLettered, true)
		equal(t, "attempt", got.Attempt, 2)
		equal(t, "error", got.Error, "second")
		wantLeaseCleared(t, got)
		if got.CompletedAt.IsZero() {
			t.Error("completed_at not set")
		}
		wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventRunFailed, starflowtype.EventRunDeadLettered)
		if c := h.claim(runnerB); c != nil {
			t.Errorf("a dead-lettered run was claimed: %+v", c)
		}
		h.wantLeaseLost("after dead-lettering", got, l)

		// A single-attempt run is dead-lettered by its first retryable failure.
		one, l1 := h.started(&state.EnqueueRunParams{MaxAttempts: 1}, runnerA)
		got, err = h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: one.ID, Lease: l1, Error: "x", Retry: true})
		if err != nil {
			t.Fatalf("OnRunError: %v", err)
		}
		equal(t, "max_attempts 1: status", got.Status, starflowtype.RunFailed)
		equal(t, "max_attempts 1: dead_lettered", got.DeadLettered, true)
	})

	t.Run("NoRetryFails", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		mark := h.lastEventID(run.ID)
		got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "fail step: out of stock"})
		if err != nil {
			t.Fatalf("OnRunError: %v", err)
		}
		equal(t, "status", got.Status, starflowtype.RunFailed)
		equal(t, "claim_state", got.ClaimState, starflowtype.ClaimFailed)
		equal(t, "dead_lettered", got.DeadLettered, false)
		equal(t, "attempt", got.Attempt, 1)
		equal(t, "error", got.Error, "fail step: out of stock")
		wantLeaseCleared(t, got)
		if got.CompletedAt.IsZero() {
			t.Error("completed_at not set")
		}
		wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventRunFailed)
		if c := h.claim(runnerB); c != nil {
			t.Errorf("a failed run was claimed: %+v", c)
		}
		h.wantLeaseLost("after failing", got, l)
	})

	t.Run("ManualHolds", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(&state.EnqueueRunParams{RecoveryMode: starflowtype.RecoveryManual}, runnerA)
		mark := h.lastEventID(run.ID)
		got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "runner lost", Retry: true})
		if err != nil {
			t.Fatalf("OnRunError: %v", err)
		}
		equal(t, "status", got.Status, starflowtype.RunInterrupted)
		equal(t, "dead_lettered", got.DeadLettered, false)
		equal(t, "error", got.Error, "runner lost")
		if got.ClaimState == starflowtype.ClaimQueued || got.ClaimState == starflowtype.ClaimClaimed || got.ClaimState == starflowtype.ClaimRunning {
			t.Errorf("claim_state = %s: a manual run must not be claimable or leased", got.ClaimState)
		}
		wantLeaseCleared(t, got)
		wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventRunInterrupted)
		if c := h.claim(runnerB); c != nil {
			t.Errorf("a run held for an operator was claimed: %+v", c)
		}
		h.wantLeaseLost("after holding", got, l)
	})
}

// testClearLease: a released run is claimable at once by another runner
// with a new epoch, and the released lease is refused.
func (s *suite) testClearLease(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	run, l := h.started(&state.EnqueueRunParams{MaxAttempts: 2}, runnerA)
	h.runStep(stepKey(run, "", "a"), l, `1`, `{}`)
	mark := h.lastEventID(run.ID)
	if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: run.ID, Lease: l}); err != nil {
		t.Fatalf("ClearLease: %v", err)
	}
	got := h.getRun(run.ID)
	equal(t, "claim_state", got.ClaimState, starflowtype.ClaimQueued)
	equal(t, "attempt (a release does not bump it)", got.Attempt, 1)
	wantLeaseCleared(t, got)
	if got.AvailableAt.After(got.UpdatedAt.Add(clockSlack)) {
		t.Errorf("available_at %v is later than now (%v)", got.AvailableAt, got.UpdatedAt)
	}
	for _, e := range h.eventsAfter(run.ID, mark) {
		if e.Type == "" {
			t.Errorf("ClearLease appended an event without a type: %+v", e)
		}
	}
	h.wantLeaseLost("after ClearLease", got, l)

	c := h.claimID(run.ID, runnerB)
	equal(t, "lease_epoch", c.LeaseEpoch, l.Epoch+1)
	equal(t, "attempt", c.Attempt, 1)
	h.wantLeaseLost("the released lease after a new claim", c, l)
	started, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()})
	if err != nil {
		t.Fatalf("OnRunStart by the new runner: %v", err)
	}
	equal(t, "status", started.Status, starflowtype.RunRunning)
	near(t, "started_at (kept from the first start)", started.StartedAt, run.StartedAt, 0)
}

// testAttemptDuration: started_at is the run's first start, while
// attempt_started_at is the first start of the current attempt (kept by a
// continuation in the same attempt, cleared by a new attempt), and
// duration_ms of a finished run is completed_at − attempt_started_at on
// the database clock: a retried, resumed or retriggered run reports its
// last attempt's duration.
func (s *suite) testAttemptDuration(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	run, l := h.started(&state.EnqueueRunParams{MaxAttempts: 3}, runnerA)
	if run.StartedAt.IsZero() {
		t.Fatal("started_at not set by OnRunStart")
	}
	near(t, "attempt_started_at of attempt 1", run.AttemptStartedAt, run.StartedAt, 0)

	// Attempt 1 fails and is retried after a backoff of the database
	// clock: attempt 2 starts at least that much later.
	const backoff = 300 * time.Millisecond
	retried, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "503", Retry: true, Backoff: backoff})
	if err != nil {
		t.Fatalf("OnRunError: %v", err)
	}
	equal(t, "attempt after the retry", retried.Attempt, 2)
	if !retried.AttemptStartedAt.IsZero() {
		t.Errorf("attempt_started_at = %v before attempt 2 started, want unset", retried.AttemptStartedAt)
	}
	near(t, "started_at after the retry", retried.StartedAt, run.StartedAt, 0)
	var c *starflowtype.Run
	eventually(t, "the retried run claimable", func() bool {
		c = h.claim(runnerB)
		return c != nil
	})
	second, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()})
	if err != nil {
		t.Fatalf("OnRunStart of attempt 2: %v", err)
	}
	near(t, "started_at in attempt 2 (the first start)", second.StartedAt, run.StartedAt, 0)
	if second.AttemptStartedAt.Sub(run.StartedAt) < backoff {
		t.Errorf("attempt_started_at of attempt 2 = %v, want at least %v after the first start %v", second.AttemptStartedAt, backoff, run.StartedAt)
	}

	// A graceful release: the next runner continues attempt 2, which keeps
	// its first start.
	if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: run.ID, Lease: c.Lease()}); err != nil {
		t.Fatalf("ClearLease: %v", err)
	}
	cont, l3 := h.claimAndStart(run.ID, runnerA)
	equal(t, "attempt of the continuation", cont.Attempt, 2)
	near(t, "attempt_started_at of the continued attempt", cont.AttemptStartedAt, second.AttemptStartedAt, 0)

	done, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l3, Output: json.RawMessage(`1`)})
	if err != nil {
		t.Fatalf("OnRunComplete: %v", err)
	}
	got := h.getRun(run.ID)
	equal(t, "duration_ms returned and stored", done.DurationMS, got.DurationMS)
	want := got.CompletedAt.Sub(got.AttemptStartedAt).Milliseconds()
	if d := got.DurationMS - want; d < -1 || d > 1 {
		t.Errorf("duration_ms = %d, want completed_at − attempt_started_at = %d (completed %v, attempt started %v)",
			got.DurationMS, want, got.CompletedAt, got.AttemptStartedAt)
	}
	if whole := got.CompletedAt.Sub(got.StartedAt).Milliseconds(); got.DurationMS > whole-backoff.Milliseconds() {
		t.Errorf("duration_ms = %d spans the first attempt (%d ms since the first start)", got.DurationMS, whole)
	}

	// Retriggered: attempt 3 has not started (no duration yet); cancelled
	// before it starts, it ends with a duration of 0 — that attempt never
	// ran — and the first start kept.
	again, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: run.ID, Reason: "retrigger"})
	if err != nil {
		t.Fatalf("RequeueRun: %v", err)
	}
	equal(t, "attempt after the retrigger", again.Attempt, 3)
	if !again.AttemptStartedAt.IsZero() || !again.CompletedAt.IsZero() || again.DurationMS != 0 {
		t.Errorf("after the retrigger: attempt_started_at %v, completed_at %v, duration_ms %d; want all unset",
			again.AttemptStartedAt, again.CompletedAt, again.DurationMS)
	}
	cancelled, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: run.ID})
	if err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	equal(t, "status", cancelled.Status, starflowtype.RunCancelled)
	equal(t, "duration_ms of an attempt that never started", cancelled.DurationMS, int64(0))
	near(t, "started_at after the cancel", cancelled.StartedAt, run.StartedAt, 0)
}

// testPhase: RecordPhaseIfChanged appends one phase event per change.
func (s *suite) testPhase(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	run, l := h.started(nil, runnerA)
	mark := h.lastEventID(run.ID)
	// A run starts with no phase; recording "no phase" changes nothing.
	if err := h.a.RecordPhaseIfChanged(h.ctx(), &state.RecordPhaseParams{RunID: run.ID, Lease: l, Phase: ""}); err != nil {
		t.Fatalf("RecordPhaseIfChanged(\"\"): %v", err)
	}
	for _, p := range []string{"reserving", "reserving", "charging", "charging", "charging", "reserving"} {
		if err := h.a.RecordPhaseIfChanged(h.ctx(), &state.RecordPhaseParams{RunID: run.ID, Lease: l, Phase: p}); err != nil {
			t.Fatalf("RecordPhaseIfChanged(%s): %v", p, err)
		}
	}
	evs := h.eventsAfter(run.ID, mark)
	wantEventTypes(t, evs, starflowtype.EventPhase, starflowtype.EventPhase, starflowtype.EventPhase)
	for i, want := range []string{"reserving", "charging", "reserving"} {
		if i < len(evs) {
			equal(t, "phase event payload", payloadField(t, evs[i], "phase"), any(want))
		}
	}
	equal(t, "phase", h.getRun(run.ID).Phase, "reserving")
}
