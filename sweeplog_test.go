package starflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// lostRun enqueues a run of workflow and claims it for a runner whose
// lease has already expired: the next sweep recovers it.
func (h *harness) lostRun(workflow string) *starflowtype.Run {
	h.t.Helper()
	ctx := context.Background()
	run := h.enqueue(workflow, map[string]any{})
	dead, err := h.store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "dead-runner", LeaseTTL: -time.Second})
	if err != nil || dead == nil || dead.ID != run.ID {
		h.t.Fatalf("claim of %s: %+v %v", run.ID, dead, err)
	}
	if _, err := h.store.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: dead.Lease()}); err != nil {
		h.t.Fatal(err)
	}
	return run
}

// TestSweepsRecordPasses: Engine.Sweeps reports the passes that recovered
// runs (newest first, at most SweepPassesKept) with each run's outcome,
// and the time of the last pass even when it found nothing.
func TestSweepsRecordPasses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{NoRunner: true})
	h.apply("name: again\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	h.apply("name: once\nmax_attempts: 1\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	h.apply("name: manual\nrecovery_mode: manual\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	ctx := context.Background()
	if got := h.eng.Sweeps(); !got.LastPassAt.IsZero() || len(got.Passes) != 0 {
		t.Fatalf("before any pass: %+v", got)
	}
	again, once, manual := h.lostRun("again"), h.lostRun("once"), h.lostRun("manual")
	before := time.Now()
	if _, err := h.eng.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.eng.Sweeps()
	if len(got.Passes) != 1 || got.LastPassAt.Before(before.Add(-time.Second)) || got.LastPassError != "" {
		t.Fatalf("after one pass: %+v", got)
	}
	want := map[string]string{again.ID: starflow.SweepRequeued, once.ID: starflow.SweepDeadLettered, manual.ID: starflow.SweepHeld}
	p := got.Passes[0]
	if len(p.Recovered) != 3 || !p.At.Equal(got.LastPassAt) || p.DurationMS < 0 {
		t.Fatalf("pass %+v: want the 3 runs, at the last pass's time", p)
	}
	for _, r := range p.Recovered {
		if want[r.RunID] != r.Outcome || r.WorkspaceID != state.DefaultWorkspace || r.Env != state.DefaultEnv || r.WorkflowName == "" {
			t.Errorf("recovered %+v: want outcome %q in default/prod with its workflow", r, want[r.RunID])
		}
		switch r.Outcome {
		case starflow.SweepRequeued:
			if r.StatusAfter != starflowtype.RunInterrupted || r.ClaimStateAfter != starflowtype.ClaimQueued || r.Attempt != 2 {
				t.Errorf("requeued %+v: want interrupted, queued, attempt 2", r)
			}
		case starflow.SweepDeadLettered:
			if r.StatusAfter != starflowtype.RunFailed || !r.DeadLettered {
				t.Errorf("dead-lettered %+v: want failed, dead-lettered", r)
			}
		case starflow.SweepHeld:
			if r.StatusAfter != starflowtype.RunInterrupted || r.ClaimStateAfter != starflowtype.ClaimAbandoned {
				t.Errorf("held %+v: want interrupted, abandoned", r)
			}
		}
	}
	// A pass that finds nothing moves the last pass, not the list.
	mark := time.Now()
	if _, err := h.eng.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.eng.Sweeps(); len(got.Passes) != 1 || got.LastPassAt.Before(mark) {
		t.Fatalf("after an empty pass: last %v (it began after %v), %d passes; want the empty pass's time, 1 pass", got.LastPassAt, mark, len(got.Passes))
	}
	// The list keeps the newest SweepPassesKept (of runs that leave
	// nothing queued: the next claim takes the next lost run).
	if _, err := h.eng.Cancel(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range starflow.SweepPassesKept + 2 {
		ids = append(ids, h.lostRun("once").ID)
		if _, err := h.eng.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got = h.eng.Sweeps()
	if len(got.Passes) != starflow.SweepPassesKept {
		t.Fatalf("%d passes kept, want %d", len(got.Passes), starflow.SweepPassesKept)
	}
	for i, p := range got.Passes {
		if len(p.Recovered) != 1 || p.Recovered[0].RunID != ids[len(ids)-1-i] {
			t.Fatalf("pass %d recovered %+v, want run %s (newest first)", i, p.Recovered, ids[len(ids)-1-i])
		}
	}
	// A copy: changing it changes nothing.
	got.Passes[0].Recovered[0].RunID = "changed"
	if h.eng.Sweeps().Passes[0].Recovered[0].RunID == "changed" {
		t.Error("Sweeps returned the log itself, not a copy")
	}
}
