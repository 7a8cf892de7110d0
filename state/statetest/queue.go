package statetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testIdempotentEnqueue: one receipt per (workspace, key); a repeat and
// concurrent duplicates yield the first run.
func (s *suite) testIdempotentEnqueue(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	first := h.enqueue(&state.EnqueueRunParams{ID: uuid.NewString(), IdempotencyKey: "order-1"})
	again := h.enqueue(&state.EnqueueRunParams{ID: uuid.NewString(), IdempotencyKey: "order-1"})
	if again.ID != first.ID {
		t.Fatalf("repeat enqueue created run %s, want the first run %s", again.ID, first.ID)
	}
	other := h.enqueue(&state.EnqueueRunParams{ID: uuid.NewString(), IdempotencyKey: "order-1", WorkspaceID: "ws2"})
	if other.ID == first.ID {
		t.Fatal("a key in another workspace returned the first workspace's run")
	}
	if n := len(h.events(first.ID)); n != 1 {
		t.Fatalf("first run has %d events after a duplicate, want 1 (run_queued)", n)
	}

	const callers = 32
	var wg sync.WaitGroup
	ids := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.a.EnqueueRun(h.ctx(), &state.EnqueueRunParams{ID: uuid.NewString(), WorkflowName: "wf", IdempotencyKey: "burst"})
			if err == nil {
				ids[i] = r.ID
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("concurrent enqueue %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent duplicates yielded runs %s and %s", ids[0], ids[i])
		}
	}
	runs, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if r.IdempotencyKey == "burst" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d runs with key burst, want exactly 1", n)
	}
}

// claimExpired claims run id with a lease that has already expired.
func (h *harness) claimExpired(id string) starflowtype.Lease {
	h.t.Helper()
	r, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: -time.Second})
	if err != nil || r == nil || r.ID != id {
		h.t.Fatalf("claim of %s with an expired lease: %+v %v", id, r, err)
	}
	if _, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: id, Lease: r.Lease()}); err != nil {
		h.t.Fatalf("OnRunStart: %v", err)
	}
	return r.Lease()
}

// testExpireOldLeases: the sweep interrupts runs with expired leases,
// applies the retry policy by recovery mode and attempts, ignores live
// leases, and fences the lost runner out.
func (s *suite) testExpireOldLeases(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	sweep := func() []*starflowtype.Run {
		t.Helper()
		runs, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{Backoff: func(int) time.Duration { return 0 }})
		if err != nil {
			t.Fatalf("ExpireOldLeases: %v", err)
		}
		return runs
	}
	if got := sweep(); len(got) != 0 {
		t.Fatalf("sweep of an empty store changed %d runs", len(got))
	}

	replay := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 2})
	lost := h.claimExpired(replay.ID)
	manual := h.enqueue(&state.EnqueueRunParams{RecoveryMode: starflowtype.RecoveryManual})
	h.claimExpired(manual.ID)
	live, _ := h.started(nil, runnerB) // a 30 s lease: not swept

	changed := sweep()
	if len(changed) != 2 {
		t.Fatalf("sweep changed %d runs, want 2", len(changed))
	}
	r := h.getRun(replay.ID)
	if r.Status != starflowtype.RunInterrupted || r.ClaimState != starflowtype.ClaimQueued || r.Attempt != 2 || r.LeasedBy != "" {
		t.Fatalf("replay run after sweep: status %s claim %s attempt %d leased_by %q", r.Status, r.ClaimState, r.Attempt, r.LeasedBy)
	}
	if !hasEvent(h.events(replay.ID), starflowtype.EventRunnerLost) {
		t.Fatal("no runner_lost event")
	}
	if r.StartedAt.IsZero() || !r.AttemptStartedAt.IsZero() {
		t.Errorf("replay run after sweep: started_at %v, attempt_started_at %v; want the first start kept and the new attempt not started", r.StartedAt, r.AttemptStartedAt)
	}
	m := h.getRun(manual.ID)
	if m.Status != starflowtype.RunInterrupted || m.ClaimState != starflowtype.ClaimAbandoned {
		t.Fatalf("manual run after sweep: %s/%s", m.Status, m.ClaimState)
	}
	if !hasEvent(h.events(manual.ID), starflowtype.EventRunInterrupted) {
		t.Fatal("manual run: no run_interrupted event after runner_lost")
	}
	if l := h.getRun(live.ID); l.Status != starflowtype.RunRunning || l.LeasedBy != runnerB {
		t.Fatalf("live run was swept: %s leased_by %q", l.Status, l.LeasedBy)
	}
	// The lost runner is fenced out.
	if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: replay.ID, Lease: lost}); err == nil {
		t.Fatal("the lost runner's write was accepted after the sweep")
	}
	// The run is claimable again with a new epoch; losing it a second time
	// exhausts its attempts: dead-lettered.
	second := h.claimExpired(replay.ID)
	if second.Epoch <= lost.Epoch {
		t.Fatalf("epoch %d after re-claim, want > %d", second.Epoch, lost.Epoch)
	}
	sweep()
	d := h.getRun(replay.ID)
	if d.Status != starflowtype.RunFailed || !d.DeadLettered || d.ClaimState != starflowtype.ClaimFailed {
		t.Fatalf("after the last attempt was lost: %s/%s dead %v", d.Status, d.ClaimState, d.DeadLettered)
	}
	if !hasEvent(h.events(replay.ID), starflowtype.EventRunDeadLettered) {
		t.Fatal("no run_dead_lettered event")
	}
	if got := sweep(); len(got) != 0 {
		t.Fatalf("a second sweep changed %d runs", len(got))
	}
}

func hasEvent(evs []*starflowtype.Event, typ starflowtype.EventType) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// testClaimByID: ClaimRunParams.RunID claims that run only, ignoring
// priority, and nothing when it is not claimable.
func (s *suite) testClaimByID(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	high := h.enqueue(&state.EnqueueRunParams{Priority: 10})
	low := h.enqueue(nil)
	claim := func(id string) *starflowtype.Run {
		t.Helper()
		r, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: id})
		if err != nil {
			t.Fatalf("ClaimRun(RunID %s): %v", id, err)
		}
		return r
	}
	if r := claim(low.ID); r == nil || r.ID != low.ID || r.LeaseEpoch != 1 {
		t.Fatalf("claim by id returned %+v, want run %s", r, low.ID)
	}
	var claimed map[string]any
	for _, e := range h.events(low.ID) {
		if e.Type == starflowtype.EventRunClaimed {
			if err := json.Unmarshal(e.Payload, &claimed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if claimed["runner_id"] != runnerA || claimed["lease_epoch"] != float64(1) {
		t.Fatalf("run_claimed payload %v, want the runner and lease_epoch 1", claimed)
	}
	if r := claim(low.ID); r != nil {
		t.Fatalf("a claimed run was claimed again: %+v", r)
	}
	if r := claim(uuid.NewString()); r != nil {
		t.Fatalf("an unknown run id claimed %+v", r)
	}
	if r := h.claim(runnerB); r == nil || r.ID != high.ID {
		t.Fatalf("the other run is still claimable normally: %+v", r)
	}
}
