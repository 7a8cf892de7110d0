package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/workflow"
)

func mustCron(t *testing.T, spec string) *workflow.Cron {
	t.Helper()
	c, err := workflow.ParseCron(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func at(sec int) time.Time { return time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC) }

func TestPlanTicks(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "@every 1s")
	secs := func(ts []time.Time) string {
		var out []string
		for _, x := range ts {
			out = append(out, fmt.Sprint(int(x.Sub(at(0))/time.Second)))
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		name    string
		catchup string
		first   bool
		late    int // ticks at or before it are missed
		skipTo  string
		fire    string
	}{
		// Every process was down from tick 0 to 5.5 (the first pass).
		{"none after downtime", workflow.CatchupNone, true, 0, "5", ""},
		{"last after downtime", workflow.CatchupLast, true, 0, "", "5"},
		{"all after downtime", workflow.CatchupAll, true, 0, "", "1,2,3,4,5"},
		// A later pass: ticks 4 and 5 are on time, 1 to 3 late.
		{"none, late ticks", workflow.CatchupNone, false, 3, "3", "4,5"},
		{"last, late ticks", workflow.CatchupLast, false, 3, "", "3,4,5"},
		{"all, late ticks", workflow.CatchupAll, false, 3, "", "1,2,3,4,5"},
		{"none, on time", workflow.CatchupNone, false, -1, "", "1,2,3,4,5"},
	}
	for _, tc := range cases {
		skipTo, fire := planTicks(c, tc.catchup, at(0), at(5).Add(500*time.Millisecond), at(tc.late), tc.first)
		gotSkip := ""
		if !skipTo.IsZero() {
			gotSkip = secs([]time.Time{skipTo})
		}
		if gotSkip != tc.skipTo || secs(fire) != tc.fire {
			t.Errorf("%s: skip to %q, fire %q; want %q, %q", tc.name, gotSkip, secs(fire), tc.skipTo, tc.fire)
		}
	}
}

// TestNewestTicksBounded: a year down with a schedule of every second
// gives the newest CatchupAllMax ticks, quickly.
func TestNewestTicksBounded(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "@every 1s")
	from, to := at(0), at(0).Add(365*24*time.Hour)
	start := time.Now()
	ticks := newestTicks(c, from, to, workflow.CatchupAllMax)
	if len(ticks) != workflow.CatchupAllMax || !ticks[len(ticks)-1].Equal(to) || !ticks[0].Equal(to.Add(-(workflow.CatchupAllMax-1)*time.Second)) {
		t.Fatalf("%d ticks, %v … %v", len(ticks), ticks[0], ticks[len(ticks)-1])
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	// An irregular cron: 09:00 on weekdays, 30 days down.
	wd := mustCron(t, "0 9 * * MON-FRI")
	ticks = newestTicks(wd, at(0), at(0).Add(30*24*time.Hour), workflow.CatchupAllMax)
	if len(ticks) != 22 { // January 2026 from the 1st (a Thursday) to the 30th: 22 weekdays
		t.Errorf("weekday ticks in 30 days: %d", len(ticks))
	}
	// Nothing in an empty interval, nor before the first tick.
	if got := newestTicks(c, at(5), at(5), 10); got != nil {
		t.Errorf("empty interval: %v", got)
	}
	if got := newestTicks(wd, at(0), at(60), 10); got != nil {
		t.Errorf("before the first tick: %v", got)
	}
}

// schedStore applies workflow name with schedules to a fresh SQLite
// file store.
func applySchedules(t *testing.T, s state.Adapter, name string, specs ...state.ScheduleSpec) {
	t.Helper()
	if _, err := s.PutDefinition(context.Background(), &state.PutDefinitionParams{Name: name, Revision: "r1",
		Spec: json.RawMessage(`{}`), Schedules: specs}); err != nil {
		t.Fatal(err)
	}
}

// prepare builds a tick's run without an engine.
func prepare(_ context.Context, sc *starflowtype.Schedule, tick time.Time) (*state.EnqueueRunParams, error) {
	return &state.EnqueueRunParams{WorkspaceID: sc.WorkspaceID, Env: sc.Env, DefinitionID: sc.DefinitionID,
		WorkflowName: sc.Workflow, WorkflowRevision: sc.Revision, TriggerType: starflowtype.TriggerSchedule,
		IdempotencyKey: fmt.Sprintf("%s/%d/%s", sc.Workflow, sc.Index, tick.Format(time.RFC3339)), Input: sc.Input}, nil
}

func scheduledRuns(t *testing.T, s state.Adapter, name string) []*starflowtype.Run {
	t.Helper()
	runs, err := s.ListRuns(context.Background(), &state.ListRunsParams{WorkspaceID: state.DefaultWorkspace, WorkflowName: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.TriggerType != starflowtype.TriggerSchedule {
			t.Errorf("run %s: trigger %s", r.ID, r.TriggerType)
		}
	}
	return runs
}

// TestSchedulerCatchup: schedules of every second applied while no
// scheduler ran for three ticks; the first pass of a new scheduler
// applies each catchup rule, and its next passes fire each tick once.
func TestSchedulerCatchup(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	for _, c := range []string{"none", "last", "all"} {
		applySchedules(t, s, "catchup-"+c, state.ScheduleSpec{Cron: "@every 1s", Timezone: "UTC", Overlap: "allow", Catchup: c, Input: json.RawMessage(`{}`)})
	}
	time.Sleep(3200 * time.Millisecond) // every process "down" across three ticks
	sch, err := NewScheduler(s, SchedulerConfig{Prepare: prepare, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := sch.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := s.ListSchedules(context.Background(), &state.ListSchedulesParams{})
	if err != nil {
		t.Fatal(err)
	}
	// The ticks that fell due while "down": whole seconds after each
	// anchor, up to the newest tick handled (3 or 4, by the anchor's
	// fraction).
	want := map[string]int{}
	for _, sc := range list {
		missed := int(sc.LastTickAt.Sub(sc.AnchorAt.Truncate(time.Second)) / time.Second)
		if missed < 3 || missed > 4 || !sc.NextFireAt.Equal(sc.LastTickAt.Add(time.Second)) {
			t.Fatalf("%s: %d ticks missed (anchor %v, last tick %v, next %v)", sc.Workflow, missed, sc.AnchorAt, sc.LastTickAt, sc.NextFireAt)
		}
		want[sc.Workflow] = map[string]int{"catchup-none": 0, "catchup-last": 1, "catchup-all": missed}[sc.Workflow]
	}
	for name, n := range want {
		if got := len(scheduledRuns(t, s, name)); got != n {
			t.Errorf("%s: %d runs after the downtime, want %d (%+v)", name, got, n, fired)
		}
	}
	// Running again: each new tick once, on time, whatever the rule.
	deadline := time.Now().Add(2100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if _, err := sch.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, n := range want {
		runs := scheduledRuns(t, s, name)
		if len(runs) < n+2 || len(runs) > n+3 {
			t.Errorf("%s: %d runs after two more seconds, want %d or %d", name, len(runs), n+2, n+3)
		}
		keys := map[string]bool{}
		for _, r := range runs {
			if keys[r.IdempotencyKey] {
				t.Errorf("%s: tick %s fired twice", name, r.IdempotencyKey)
			}
			keys[r.IdempotencyKey] = true
		}
	}
}

// TestSchedulerNullstore: a store that keeps no schedules turns the
// scheduler off without an error.
func TestSchedulerNullstore(t *testing.T) {
	t.Parallel()
	s := nullstore.New()
	t.Cleanup(func() { s.Close() })
	sch, err := NewScheduler(s, SchedulerConfig{Prepare: prepare, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if fired, err := sch.Pass(context.Background()); err != nil || fired != nil {
			t.Fatalf("Pass on nullstore: %v, %v", fired, err)
		}
	}
	if _, err := NewScheduler(s, SchedulerConfig{}); err == nil {
		t.Error("NewScheduler without Prepare: no error")
	}
}
