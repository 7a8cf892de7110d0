package statetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testClaim: ClaimRun's atomic conditional write, its order, delays, pool
// affinity and mutual exclusion under concurrency.
func (s *suite) testClaim(t *testing.T) {
	t.Parallel()

	t.Run("Several", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		low := h.enqueue(nil)
		high := h.enqueue(&state.EnqueueRunParams{Priority: 5})
		mid := h.enqueue(&state.EnqueueRunParams{Priority: 1})
		last := h.enqueue(nil)
		claim := func(limit int) []*starflowtype.Run {
			t.Helper()
			runs, err := h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, Limit: limit})
			if err != nil {
				t.Fatalf("ClaimRuns(%d): %v", limit, err)
			}
			return runs
		}
		got := claim(3)
		ids := func(runs []*starflowtype.Run) []string {
			var out []string
			for _, r := range runs {
				out = append(out, r.ID)
			}
			return out
		}
		equal(t, "first three in claim order", dump(ids(got)), dump([]string{high.ID, mid.ID, low.ID}))
		for _, r := range got {
			equal(t, "claim_state", r.ClaimState, starflowtype.ClaimClaimed)
			equal(t, "lease_epoch", r.LeaseEpoch, 1)
			equal(t, "stored as returned", dump(h.getRun(r.ID)), dump(r))
			wantEventTypes(t, h.events(r.ID), starflowtype.EventRunQueued, starflowtype.EventRunClaimed)
		}
		equal(t, "the rest", dump(ids(claim(5))), dump([]string{last.ID}))
		equal(t, "nothing left", len(claim(5)), 0)
		// By id: at most the one run.
		r := h.enqueue(nil)
		h.enqueue(nil)
		runs, err := h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: r.ID, Limit: 5})
		if err != nil || len(runs) != 1 || runs[0].ID != r.ID {
			t.Fatalf("ClaimRuns by id = %s, %v; want run %s only", dump(ids(runs)), err, r.ID)
		}
	})

	t.Run("Starts", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		a, b := h.enqueue(nil), h.enqueue(nil)
		runs, err := h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, Limit: 3, Start: true})
		if err != nil || len(runs) != 2 || runs[0].ID != a.ID || runs[1].ID != b.ID {
			t.Fatalf("ClaimRuns(Start) = %s, %v; want runs %s and %s, in that order", dump(runs), err, a.ID, b.ID)
		}
		for _, r := range runs {
			equal(t, "status", r.Status, starflowtype.RunRunning)
			equal(t, "claim_state", r.ClaimState, starflowtype.ClaimRunning)
			equal(t, "lease_epoch", r.LeaseEpoch, 1)
			equal(t, "leased_by", r.LeasedBy, runnerA)
			if r.StartedAt.IsZero() || r.AttemptStartedAt.IsZero() {
				t.Errorf("started run %s: started_at %v, attempt_started_at %v; want both set", r.ID, r.StartedAt, r.AttemptStartedAt)
			}
			equal(t, "stored as returned", dump(h.getRun(r.ID)), dump(r))
			evs := h.events(r.ID)
			wantEventTypes(t, evs, starflowtype.EventRunQueued, starflowtype.EventRunClaimed, starflowtype.EventRunStarted)
			for _, e := range evs[1:] {
				// The bytes every path writes (a claim, then OnRunStart, too).
				equal(t, string(e.Type)+" payload", string(e.Payload), `{"lease_epoch":1,"runner_id":"`+runnerA+`"}`)
			}
			// The lease returned is the one the store holds.
			h.runStep(stepKey(r, "", "s1"), r.Lease(), `1`, `{}`)
		}

		// A paused run woken by a signal resumes: its claim that starts it
		// writes run_resumed, not run_started, and clears the snapshot.
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "wait")
		h.waitOn(k, l, state.RegisterWaitParams{Signal: "go"})
		h.signal(state.SignalParams{RunID: run.ID, Signal: "go"})
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
		runs, err = h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerB, LeaseTTL: leaseTTL, RunID: run.ID, Start: true})
		if err != nil || len(runs) != 1 {
			t.Fatalf("ClaimRuns(RunID, Start) of the woken run = %s, %v", dump(runs), err)
		}
		r := runs[0]
		equal(t, "resumed status", r.Status, starflowtype.RunRunning)
		equal(t, "resumed epoch", r.LeaseEpoch, l.Epoch+1)
		if len(r.Checkpoint) != 0 {
			t.Errorf("checkpoint_json after the claim that starts = %s, want cleared", r.Checkpoint)
		}
		equal(t, "stored as returned", dump(h.getRun(r.ID)), dump(r))
		evs := h.events(r.ID)
		wantEventTypes(t, evs[len(evs)-2:], starflowtype.EventRunClaimed, starflowtype.EventRunResumed)
		equal(t, "run_started events", h.countEvents(r.ID, starflowtype.EventRunStarted), 1)
		h.wantLeaseLost("the lease before the pause", r, l)
		h.nodeComplete(k, r.Lease(), `{}`, `{}`)

		// A run and its descendants (starflow run's claim), started.
		parent := h.enqueue(nil)
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID})
		h.enqueue(nil) // not of the family
		for _, want := range []string{parent.ID, child.ID, ""} {
			runs, err := h.a.ClaimRuns(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL,
				RunID: parent.ID, WithDescendants: true, Start: true})
			if err != nil || len(runs) > 1 || (want == "") != (len(runs) == 0) || (want != "" && runs[0].ID != want) {
				t.Fatalf("ClaimRuns(family, Start) = %s, %v; want run %q", dump(runs), err, want)
			}
			if want != "" {
				equal(t, "family run status", runs[0].Status, starflowtype.RunRunning)
				wantEventTypes(t, h.events(want), starflowtype.EventRunQueued, starflowtype.EventRunClaimed, starflowtype.EventRunStarted)
			}
		}
	})

	t.Run("SetsLease", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(nil)
		before := time.Now()
		c := h.claimID(r.ID, runnerA)
		equal(t, "claim_state", c.ClaimState, starflowtype.ClaimClaimed)
		equal(t, "leased_by", c.LeasedBy, runnerA)
		equal(t, "lease_epoch", c.LeaseEpoch, r.LeaseEpoch+1)
		equal(t, "claim_attempts", c.ClaimAttempts, r.ClaimAttempts+1)
		equal(t, "attempt (a claim does not bump it)", c.Attempt, 1)
		equal(t, "Lease()", c.Lease(), starflowtype.Lease{RunnerID: runnerA, Epoch: r.LeaseEpoch + 1})
		if !c.LeaseUntil.After(before) {
			t.Errorf("lease_until %v is not in the future (claimed after %v)", c.LeaseUntil, before)
		}
		near(t, "lease_until", c.LeaseUntil, c.UpdatedAt.Add(leaseTTL), clockSlack)

		stored := h.getRun(r.ID)
		equal(t, "stored claim_state", stored.ClaimState, starflowtype.ClaimClaimed)
		equal(t, "stored lease", stored.Lease(), c.Lease())

		evs := h.events(r.ID)
		wantEventTypes(t, evs, starflowtype.EventRunQueued, starflowtype.EventRunClaimed)

		if again := h.claim(runnerB); again != nil {
			t.Errorf("a claimed run was claimed again by %s: %+v", runnerB, again)
		}

		started, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: r.ID, Lease: c.Lease()})
		if err != nil {
			t.Fatalf("OnRunStart: %v", err)
		}
		equal(t, "status after OnRunStart", started.Status, starflowtype.RunRunning)
		equal(t, "claim_state after OnRunStart", started.ClaimState, starflowtype.ClaimRunning)
		if started.StartedAt.IsZero() {
			t.Error("started_at not set by OnRunStart")
		}
		wantEventTypes(t, h.eventsAfter(r.ID, evs[len(evs)-1].ID), starflowtype.EventRunStarted)
	})

	t.Run("RefreshLease", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		mark := h.lastEventID(run.ID)
		until, err := h.a.RefreshLease(h.ctx(), &state.RefreshLeaseParams{RunID: run.ID, Lease: l, LeaseTTL: time.Hour})
		if err != nil {
			t.Fatalf("RefreshLease: %v", err)
		}
		got := h.getRun(run.ID)
		near(t, "returned lease_until", until, got.LeaseUntil, 0)
		near(t, "lease_until", got.LeaseUntil, got.LastHeartbeat.Add(time.Hour), clockSlack)
		if got.LastHeartbeat.Before(run.LastHeartbeat) {
			t.Errorf("last_heartbeat went back from %v to %v", run.LastHeartbeat, got.LastHeartbeat)
		}
		equal(t, "lease", got.Lease(), l)
		equal(t, "status", got.Status, starflowtype.RunRunning)
		equal(t, "events appended by a heartbeat", len(h.eventsAfter(run.ID, mark)), 0)
	})

	t.Run("NothingClaimable", func(t *testing.T) {
		t.Parallel()
		h := s.adapter(t)
		if r := h.claim(runnerA); r != nil {
			t.Fatalf("ClaimRun on an empty store = %+v, want nil", r)
		}
	})

	t.Run("PriorityOrder", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		low := h.enqueue(&state.EnqueueRunParams{Priority: 0})
		high := h.enqueue(&state.EnqueueRunParams{Priority: 10})
		mid := h.enqueue(&state.EnqueueRunParams{Priority: 5})
		neg := h.enqueue(&state.EnqueueRunParams{Priority: -3})
		for _, want := range []*starflowtype.Run{high, mid, low, neg} {
			h.claimID(want.ID, runnerA)
		}
		if r := h.claim(runnerA); r != nil {
			t.Errorf("a fifth claim returned %s", r.ID)
		}
	})

	t.Run("OldestFirstAtEqualPriority", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		first := h.enqueue(nil)
		var second *starflowtype.Run
		// available_at comes from the database clock; enqueue until the
		// second run's is strictly later, so the order is defined.
		eventually(t, "a later available_at", func() bool {
			second = h.enqueue(nil)
			return second.AvailableAt.After(first.AvailableAt)
		})
		h.claimID(first.ID, runnerA)
	})

	t.Run("DelayedNotClaimable", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(&state.EnqueueRunParams{Delay: time.Hour})
		near(t, "available_at", r.AvailableAt, r.CreatedAt.Add(time.Hour), clockSlack)
		if c := h.claim(runnerA); c != nil {
			t.Fatalf("a run delayed by an hour was claimed: %+v", c)
		}
		now := h.enqueue(nil)
		h.claimID(now.ID, runnerA)
	})

	t.Run("DelayedClaimableAfterDelay", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(&state.EnqueueRunParams{Delay: 300 * time.Millisecond})
		var c *starflowtype.Run
		eventually(t, "the delayed run claimable", func() bool {
			c = h.claim(runnerA)
			return c != nil
		})
		equal(t, "claimed", c.ID, r.ID)
		if c.UpdatedAt.Before(r.AvailableAt) {
			t.Errorf("claimed at %v (database clock), before available_at %v", c.UpdatedAt, r.AvailableAt)
		}
	})

	t.Run("RunnerPools", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		gpu := h.enqueue(&state.EnqueueRunParams{RunnerPool: "gpu", Priority: 1})
		anyPool := h.enqueue(&state.EnqueueRunParams{})

		// A runner without pools, or with other pools, only gets the run
		// that names no pool.
		h.claimID(anyPool.ID, runnerA)
		if c := h.claim(runnerA); c != nil {
			t.Errorf("a runner with no pools claimed %s (pool %q)", c.ID, c.RunnerPool)
		}
		if c := h.claim(runnerA, "cpu", "io"); c != nil {
			t.Errorf("a runner of pools cpu,io claimed %s (pool %q)", c.ID, c.RunnerPool)
		}
		h.claimID(gpu.ID, runnerB, "cpu", "gpu")

		// A run with no pool goes to a runner that lists pools, too.
		anyPool2 := h.enqueue(nil)
		h.claimID(anyPool2.ID, runnerB, "gpu")
	})

	t.Run("WorkspaceFilter", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		acme := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "acme", Priority: 1})
		def := h.enqueue(nil)
		c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, WorkspaceID: state.DefaultWorkspace})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil || c.ID != def.ID {
			t.Fatalf("claim in workspace default = %+v, want %s", c, def.ID)
		}
		c, err = h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, WorkspaceID: state.DefaultWorkspace})
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			t.Errorf("claim in workspace default took %s of workspace %s", c.ID, c.WorkspaceID)
		}
		h.claimID(acme.ID, runnerA)
	})

	t.Run("RunIDWithDescendants", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		root := h.enqueue(nil)
		other := h.enqueue(&state.EnqueueRunParams{Priority: 9}) // unrelated, claimed first by anyone else
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: root.ID})
		grandchild := h.enqueue(&state.EnqueueRunParams{ParentRunID: child.ID, Priority: 1})
		nephew := h.enqueue(&state.EnqueueRunParams{ParentRunID: other.ID, Priority: 5})
		family := func() *starflowtype.Run {
			t.Helper()
			c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: root.ID, WithDescendants: true})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		// Only root itself without WithDescendants, even when it is taken.
		if c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: child.ID}); err != nil || c == nil || c.ID != child.ID {
			t.Fatalf("claim by RunID %s = %+v, %v", child.ID, c, err)
		}
		// grandchild (priority 1) before root (priority 0); the child is
		// claimed already; other and its child are never this family's.
		for _, want := range []*starflowtype.Run{grandchild, root} {
			c := family()
			if c == nil || c.ID != want.ID {
				t.Fatalf("family claim = %+v, want %s", c, want.ID)
			}
			equal(t, "leased_by", c.LeasedBy, runnerA)
		}
		if c := family(); c != nil {
			t.Fatalf("family claim took %s (parent %q), want nothing left", c.ID, c.ParentRunID)
		}
		if c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: grandchild.ID}); err != nil || c != nil {
			t.Fatalf("claim of a claimed run = %+v, %v", c, err)
		}
		h.claimID(other.ID, runnerB)
		h.claimID(nephew.ID, runnerB)
	})

	t.Run("ConcurrentClaimsExclusive", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		const runs, runners = 40, 8
		want := map[string]bool{}
		for range runs {
			want[h.enqueue(nil).ID] = true
		}
		var (
			mu      sync.Mutex
			claimed = map[string][]string{} // run id → runners
			wg      sync.WaitGroup
			errs    = make(chan error, runners)
		)
		start := make(chan struct{})
		for i := range runners {
			runner := "runner-" + string(rune('a'+i))
			wg.Go(func() {
				<-start
				for {
					r, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runner, LeaseTTL: leaseTTL})
					if err != nil {
						errs <- err
						return
					}
					if r == nil {
						return
					}
					mu.Lock()
					claimed[r.ID] = append(claimed[r.ID], runner)
					mu.Unlock()
					if r.LeasedBy != runner || r.LeaseEpoch != 1 {
						errs <- fmt.Errorf("run %s claimed by %s came back with lease %+v", r.ID, runner, r.Lease())
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent claim: %v", err)
		}
		for id := range want {
			if got := claimed[id]; len(got) != 1 {
				t.Errorf("run %s claimed by %v, want exactly one runner", id, got)
			}
		}
		for id := range claimed {
			if !want[id] {
				t.Errorf("claimed unknown run %s", id)
			}
		}
		for id := range want {
			equal(t, "claim_attempts of "+id, h.getRun(id).ClaimAttempts, 1)
		}
	})
}
