package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// TestCurrentStepsUpdatedAt (issue 10 item 14): a warm run entry's
// current steps carry updated_at, the time of the cold write that last
// changed each step row (database clock) — equal to the cold row's
// updated_at, never the zero time — and a later write to one step moves
// its updated_at and not the others'.
func TestCurrentStepsUpdatedAt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		ctx := context.Background()
		c := open(mirror.Hook())
		ws := memory.New()
		m := newMirror(t, c, mirror.Config{Warm: ws})
		r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		r = startRun(t, m, r.ID)
		ka := state.StepKey{RunID: r.ID, Attempt: 1, StepID: "a"}
		kb := state.StepKey{RunID: r.ID, Attempt: 1, ScopePath: "fan.lane_b", StepID: "b"}
		for _, k := range []state.StepKey{ka, kb} {
			if err := m.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: r.Lease(), Kind: "noop", Try: 1}); err != nil {
				t.Fatal(err)
			}
		}

		// current returns the warm entry's current steps once drained, by
		// step id, checked against the cold rows.
		current := func(what string) map[string]warm.StepEntry {
			t.Helper()
			eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
			e, err := ws.GetRun(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			coldSteps, err := c.ListSteps(ctx, &state.ListStepsParams{RunID: r.ID, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]*starflowtype.Step{}
			for _, s := range coldSteps {
				byID[s.StepID] = s
			}
			out := map[string]warm.StepEntry{}
			for _, s := range e.CurrentSteps {
				out[s.StepID] = s
				cs := byID[s.StepID]
				switch {
				case s.UpdatedAt.IsZero():
					t.Errorf("%s: current step %s has updated_at %v", what, s.StepID, s.UpdatedAt)
				case cs == nil || !s.UpdatedAt.Equal(cs.UpdatedAt):
					t.Errorf("%s: current step %s updated_at %v, want the cold row's %+v", what, s.StepID, s.UpdatedAt, cs)
				case s.UpdatedAt.Before(r.UpdatedAt) || s.UpdatedAt.Sub(r.UpdatedAt) > time.Minute:
					t.Errorf("%s: current step %s updated_at %v, not after the run's start %v (database clock)", what, s.StepID, s.UpdatedAt, r.UpdatedAt)
				}
			}
			if len(out) != 2 {
				t.Fatalf("%s: current steps %+v, want a and b", what, e.CurrentSteps)
			}
			return out
		}
		first := current("after the starts")

		// Step a fails a try (retried later): its row is written again.
		if err := m.OnNodeRetry(ctx, &state.NodeRetryParams{StepKey: ka, Lease: r.Lease(), Try: 1, Error: "503", Backoff: time.Second}); err != nil {
			t.Fatal(err)
		}
		second := current("after a's retry")
		if second["a"].UpdatedAt.Before(first["a"].UpdatedAt) {
			t.Errorf("a's updated_at went back from %v to %v", first["a"].UpdatedAt, second["a"].UpdatedAt)
		}
		if !second["b"].UpdatedAt.Equal(first["b"].UpdatedAt) {
			t.Errorf("b's updated_at moved from %v to %v though its row was not written", first["b"].UpdatedAt, second["b"].UpdatedAt)
		}
	})
}
