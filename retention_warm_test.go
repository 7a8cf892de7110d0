package starflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// TestRetentionRemovesWarmEntries: a run that retention removes from the
// cold store leaves the warm tier too — its entry, its steps and its
// events feed — through the outbox, while a run that stays keeps its
// entry. (Before, the runs phase ran without the hooks and nothing else
// drops a finished run's warm entry: the memory store and the NATS
// buckets kept every run gc had removed, for as long as they lived.)
func TestRetentionRemovesWarmEntries(t *testing.T) {
	t.Parallel()
	h, ws := newWarmHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	old := h.runToEnd(gcTestWorkflow, nil)
	if old.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", old.ID, old.Status)
	}
	eventually(t, "the old run's warm entry", func() bool {
		e, err := ws.GetRun(ctx, old.ID)
		return err == nil && e.Status == string(starflowtype.RunSucceeded)
	})
	ageEndedRuns(t, h.store)
	kept := h.runToEnd(gcTestWorkflow, nil)
	eventually(t, "the kept run's warm entry", func() bool {
		e, err := ws.GetRun(ctx, kept.ID)
		return err == nil && e.Status == string(starflowtype.RunSucceeded)
	})
	if steps, _ := ws.ListSteps(ctx, old.ID); len(steps) == 0 {
		t.Fatal("setup: the old run has no warm steps")
	}
	if evs, _ := ws.ListEvents(ctx, old.ID, 0); len(evs) == 0 {
		t.Fatal("setup: the old run has no warm events")
	}

	rep, err := h.eng.CollectGarbage(ctx, state.GCParams{})
	if err != nil || rep.Runs != 1 {
		t.Fatalf("CollectGarbage = %+v, %v; want the old run removed", rep, err)
	}
	eventually(t, "the removed run's warm entry gone", func() bool {
		_, err := h.eng.LiveRun(ctx, old.ID)
		return errors.Is(err, warm.ErrNotFound)
	})
	if steps, err := ws.ListSteps(ctx, old.ID); err != nil || len(steps) != 0 {
		t.Errorf("warm steps of the removed run: %d, %v", len(steps), err)
	}
	if evs, err := ws.ListEvents(ctx, old.ID, 0); err != nil || len(evs) != 0 {
		t.Errorf("warm events of the removed run: %d, %v", len(evs), err)
	}
	if e, err := ws.GetRun(ctx, kept.ID); err != nil || e.Status != string(starflowtype.RunSucceeded) {
		t.Errorf("the kept run's warm entry: %+v, %v", e, err)
	}

	// A dry run tells the warm tier nothing.
	ageEndedRuns(t, h.store)
	if rep, err := h.eng.CollectGarbage(ctx, state.GCParams{DryRun: true}); err != nil || rep.Runs != 1 {
		t.Fatalf("dry run = %+v, %v; want one run counted", rep, err)
	}
	eventually(t, "the outbox drained", func() bool { return outboxPending(t, h) == 0 })
	if _, err := ws.GetRun(ctx, kept.ID); err != nil {
		t.Errorf("the kept run's warm entry after a dry run: %v", err)
	}
}

// outboxPending counts h's unapplied mirror_outbox rows.
func outboxPending(t *testing.T, h *harness) int {
	t.Helper()
	var n int
	if err := h.store.DB().QueryRow(`SELECT count(*) FROM mirror_outbox WHERE applied_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
