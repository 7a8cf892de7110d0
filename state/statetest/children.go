package statetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testChildren: the depth of child runs (workflow_runs.depth).
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
}
