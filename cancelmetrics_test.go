package starflow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// runsEnded reads starflow_runs_ended_total{workflow, status} from eng's
// registry (0 when the series does not exist).
func runsEnded(t *testing.T, eng *starflow.Engine, workflow, status string) float64 {
	t.Helper()
	fams, err := eng.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "starflow_runs_ended_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["workflow"] == workflow && labels["status"] == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// stopped stops h's engine, so every count its runner makes is in.
func stopped(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCancelAtParkCounted: a run whose cancel came while it entered its
// wait is ended by its runner's ParkRun, and that end is counted once in
// starflow_runs_ended_total{status="cancelled"}, as OnRunCancelled's is
// (before, the runner took the cancelled ParkRun for a park: no end
// counted, outcome "paused").
func TestCancelAtParkCounted(t *testing.T) {
	t.Parallel()
	var h *harness
	var once sync.Once
	h = newHarness(t, starflow.Config{WaitHook: func(p, runID, scope, stepID string) {
		if p != "engine.wait.after_paused" || stepID != "call" {
			return
		}
		once.Do(func() {
			if r, err := h.eng.Cancel(context.Background(), runID); err != nil || !r.CancelRequested {
				t.Errorf("cancel while entering: %+v, %v; want a request", r, err)
			}
		})
	}})
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	parent := h.enqueue("parent", map[string]any{"n": 0})
	if r := awaitEnd(t, h, parent.ID); r.Status != starflowtype.RunCancelled {
		t.Fatalf("parent: %s", r.Status)
	}
	stopped(t, h)
	if got := runsEnded(t, h.eng, "parent", "cancelled"); got != 1 {
		t.Errorf("starflow_runs_ended_total{workflow=parent,status=cancelled} = %g, want 1", got)
	}
}

// TestScheduleCancelPreviousCounted: every run a schedule's
// cancel_previous cancels is counted once in
// starflow_runs_ended_total{status="cancelled"}: by the scheduler when
// it cancelled a parked run at once, by its runner when it held it
// (before, the scheduler's cancels went uncounted).
func TestScheduleCancelPreviousCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Maintenance: true, ScheduleInterval: 50 * time.Millisecond})
	h.start()
	h.apply("name: ticking\nschedules:\n  - {cron: '@every 1s', overlap: cancel_previous}\nsteps:\n  - id: hold\n    wait: {signal: never}\n")
	ctx := context.Background()
	cancelled := func() int {
		runs, err := h.store.ListRuns(ctx, &state.ListRunsParams{WorkflowName: "ticking", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range runs {
			if r.Status == starflowtype.RunCancelled {
				n++
			}
		}
		return n
	}
	eventually(t, "two runs cancelled by the schedule", func() bool { return cancelled() >= 2 })
	stopped(t, h)
	if got, want := runsEnded(t, h.eng, "ticking", "cancelled"), cancelled(); got != float64(want) {
		t.Errorf("starflow_runs_ended_total{workflow=ticking,status=cancelled} = %g, want %d (the runs cancelled)", got, want)
	}
}
