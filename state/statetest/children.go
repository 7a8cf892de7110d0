package statetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// deepTree is deeper than any bound a cancel cascade ever had (64).
const deepTree = 100

// testChildren: the depth of child runs (workflow_runs.depth) and
// cancels of trees of any depth.
func (s *suite) testChildren(t *testing.T) {
	t.Parallel()

	t.Run("Depth", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		root := h.enqueue(nil)
		equal(t, "root depth", root.Depth, 0)
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: root.ID, TriggerType: starflowtype.TriggerChild, IdempotencyKey: "child-1"})
		equal(t, "child depth", child.Depth, 1)
		grandchild := h.enqueue(&state.EnqueueRunParams{ParentRunID: child.ID, TriggerType: starflowtype.TriggerChild})
		equal(t, "grandchild depth", grandchild.Depth, 2)
		equal(t, "grandchild depth read back", h.getRun(grandchild.ID).Depth, 2)
		// The depth comes from the parent's row, whatever the caller
		// passes: a repeat of the child's enqueue answers the first run.
		again := h.enqueue(&state.EnqueueRunParams{ParentRunID: root.ID, TriggerType: starflowtype.TriggerChild, IdempotencyKey: "child-1"})
		equal(t, "repeated enqueue", again.ID, child.ID)
		equal(t, "repeated enqueue depth", again.Depth, 1)
		// A claim hands the runner the depth it checks.
		c := h.claimOwn(grandchild.ID, runnerA)
		equal(t, "claimed depth", c.Depth, 2)
		started, _ := h.claimStartOwn(child.ID, runnerB)
		equal(t, "started depth", started.Depth, 1)
		// A parent whose row is gone still makes a child.
		orphan := h.enqueue(&state.EnqueueRunParams{ParentRunID: uuid.NewString(), TriggerType: starflowtype.TriggerChild})
		equal(t, "depth under a missing parent", orphan.Depth, 1)
	})

	// A chain deeper than 64 runs (a runaway recursion) is cancelled from
	// its root in one call, whatever state its runs are in.
	t.Run("CancelDeepTree", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		root := h.enqueue(nil)
		chain := []*starflowtype.Run{root}
		var parked *starflowtype.Run
		var parkedWait *starflowtype.Wait
		for d := 1; d <= deepTree; d++ {
			r := h.enqueue(&state.EnqueueRunParams{ParentRunID: chain[d-1].ID, TriggerType: starflowtype.TriggerChild})
			equal(t, "chain depth", r.Depth, d)
			chain = append(chain, r)
			if d == deepTree/2 {
				// One run half-way down is parked at a wait of its own.
				pr, pl := h.claimStartOwn(r.ID, runnerB)
				parkedWait, _ = h.waitOn(stepKey(pr, "", "w"), pl, state.RegisterWaitParams{Signal: "go"})
				parked = pr
			}
		}
		// A side branch below the deepest level of the old bound.
		side := h.enqueue(&state.EnqueueRunParams{ParentRunID: chain[70].ID, TriggerType: starflowtype.TriggerChild})
		sideChild := h.enqueue(&state.EnqueueRunParams{ParentRunID: side.ID, TriggerType: starflowtype.TriggerChild})
		// The deepest run is running: its cancel is a request.
		deepest := chain[deepTree]
		_, dl := h.claimStartOwn(deepest.ID, runnerA)

		c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: root.ID})
		if err != nil {
			t.Fatalf("CancelRun of the root of a tree %d deep: %v", deepTree, err)
		}
		equal(t, "root status", c.Status, starflowtype.RunCancelled)
		for _, r := range append(chain[:deepTree], side, sideChild) {
			h.wantClaim(r.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		}
		h.wantWait(parkedWait.ID, starflowtype.WaitCancelled, "")
		if !hasEvent(h.events(parked.ID), starflowtype.EventRunCancelled) {
			t.Errorf("parked run %s has no run_cancelled event", parked.ID)
		}
		if r := h.getRun(deepest.ID); r.Status != starflowtype.RunRunning || !r.CancelRequested {
			t.Errorf("deepest run: %s cancel_requested=%v, want running with cancel requested", r.Status, r.CancelRequested)
		}
		err = h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: stepKey(deepest, "", "s"), Lease: dl, Kind: "x", Try: 1})
		wantErrIs(t, "deepest run's next step", err, starflowtype.ErrCancelRequested)
	})

	// A runner ending its run cancelled cascades as deep.
	t.Run("RunCancelledDeepTree", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		top, tl := h.startOwn(runnerA)
		if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: top.ID}); err != nil {
			t.Fatal(err)
		}
		chain := []*starflowtype.Run{top}
		for d := 1; d <= deepTree; d++ {
			chain = append(chain, h.enqueue(&state.EnqueueRunParams{ParentRunID: chain[d-1].ID, TriggerType: starflowtype.TriggerChild}))
		}
		if _, err := h.a.OnRunCancelled(h.ctx(), &state.RunCancelledParams{RunID: top.ID, Lease: tl}); err != nil {
			t.Fatalf("OnRunCancelled of the root of a tree %d deep: %v", deepTree, err)
		}
		for _, r := range chain {
			h.wantClaim(r.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		}
	})
}
