package statetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testSchedules: a revision's schedules replace the workflow's (keeping
// the state of unchanged ones), the per-workflow pause, the scheduler's
// due read, and FireSchedule's compare-and-set with each overlap rule. A
// store that is not durable refuses them all with ErrSchedulesNeedStore.
func (s *suite) testSchedules(t *testing.T) {
	t.Run("Replace", s.testSchedulesReplace)
	t.Run("Pause", s.testSchedulesPause)
	t.Run("Fire", s.testSchedulesFire)
	t.Run("Overlap", s.testSchedulesOverlap)
}

// scheduled opens an adapter for a schedules case; one that is not
// durable must refuse schedules, and the case is skipped after checking.
func (s *suite) scheduled(t *testing.T) *harness {
	t.Helper()
	h := s.stored(t)
	if h.caps.Durable {
		return h
	}
	_, _, err := h.a.ListSchedules(h.ctx(), &state.ListSchedulesParams{})
	wantErrIs(t, "ListSchedules on a store that is not durable", err, state.ErrSchedulesNeedStore)
	_, _, err = h.a.DueSchedules(h.ctx(), &state.DueSchedulesParams{})
	wantErrIs(t, "DueSchedules", err, state.ErrSchedulesNeedStore)
	_, err = h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{Workflow: "wf", Paused: true})
	wantErrIs(t, "PauseSchedules", err, state.ErrSchedulesNeedStore)
	_, err = h.a.FireSchedule(h.ctx(), &state.FireScheduleParams{Workflow: "wf"})
	wantErrIs(t, "FireSchedule", err, state.ErrSchedulesNeedStore)
	t.Skip("statetest: schedules need a durable store")
	return nil
}

func spec(cron string) state.ScheduleSpec {
	return state.ScheduleSpec{Cron: cron, Timezone: "UTC", Overlap: "skip", Catchup: "last", Input: json.RawMessage(`{"n":1}`)}
}

// putSchedules applies revision rev of workflow "wf" in workspace ws with
// schedules.
func (h *harness) putSchedules(ws, rev string, schedules ...state.ScheduleSpec) *starflowtype.Definition {
	h.t.Helper()
	d, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{WorkspaceID: ws, Name: "wf", Revision: rev,
		Spec: json.RawMessage(`{}`), Env: "staging", Schedules: schedules})
	if err != nil {
		h.t.Fatalf("PutDefinition(%s): %v", rev, err)
	}
	return d
}

func (h *harness) schedules(ws string) []*starflowtype.Schedule {
	h.t.Helper()
	out, now, err := h.a.ListSchedules(h.ctx(), &state.ListSchedulesParams{WorkspaceID: ws})
	if err != nil {
		h.t.Fatalf("ListSchedules: %v", err)
	}
	near(h.t, "ListSchedules' now", now, time.Now(), clockSlack)
	return out
}

func (h *harness) fireSchedule(p state.FireScheduleParams) *state.FireResult {
	h.t.Helper()
	res, err := h.a.FireSchedule(h.ctx(), &p)
	if err != nil {
		h.t.Fatalf("FireSchedule(%s/%d v%d): %v", p.Workflow, p.Index, p.Version, err)
	}
	return res
}

// tickRun is the run of one tick of schedule sc.
func tickRun(sc *starflowtype.Schedule, tick time.Time) *state.EnqueueRunParams {
	return &state.EnqueueRunParams{WorkspaceID: sc.WorkspaceID, Env: sc.Env, DefinitionID: sc.DefinitionID,
		WorkflowName: sc.Workflow, WorkflowRevision: sc.Revision, TriggerType: starflowtype.TriggerSchedule,
		IdempotencyKey: "schedule/" + sc.Workflow + "/" + tick.Format(time.RFC3339), Input: sc.Input}
}

func (s *suite) testSchedulesReplace(t *testing.T) {
	t.Parallel()
	h := s.scheduled(t)
	d1 := h.putSchedules("ws-a", "rev1", spec("@every 1s"), spec("0 9 * * *"), spec("@hourly"))
	h.putSchedules("ws-b", "rev1", spec("@daily"))
	got := h.schedules("ws-a")
	if len(got) != 3 {
		t.Fatalf("ws-a has %d schedules: %s", len(got), dump(got))
	}
	sc := got[0]
	equal(t, "workflow", sc.Workflow, "wf")
	equal(t, "env", sc.Env, "staging")
	equal(t, "definition id", sc.DefinitionID, d1.ID)
	equal(t, "revision", sc.Revision, "rev1")
	equal(t, "index 1 cron", got[1].Cron, "0 9 * * *")
	equal(t, "overlap", sc.Overlap, "skip")
	jsonEqual(t, "input", sc.Input, `{"n":1}`)
	near(t, "anchor_at", sc.AnchorAt, time.Now(), clockSlack)
	if !sc.NextFireAt.IsZero() || !sc.LastTickAt.IsZero() || sc.LastRunID != "" || sc.Paused {
		t.Errorf("a new schedule has state: %s", dump(sc))
	}
	equal(t, "schedules of ws-b", len(h.schedules("ws-b")), 1)
	equal(t, "schedules of every workspace", len(h.schedules("")), 4)

	// Fire index 0 and 1 once, so they have a last tick.
	tick := time.Now().UTC().Truncate(time.Second)
	for _, sc := range got[:2] {
		h.fireSchedule(state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Index: sc.Index, Version: sc.Version,
			Tick: tick, Next: tick.Add(time.Hour), Run: tickRun(sc, tick), Overlap: "allow"})
	}
	// rev2: index 0 unchanged but its input, index 1 gets another cron,
	// index 2 is gone.
	changed := spec("@every 1s")
	changed.Input, changed.Overlap = json.RawMessage(`{"n":2}`), "allow"
	d2 := h.putSchedules("ws-a", "rev2", changed, spec("0 10 * * *"))
	after := h.schedules("ws-a")
	if len(after) != 2 {
		t.Fatalf("after rev2: %d schedules: %s", len(after), dump(after))
	}
	kept, fresh := after[0], after[1]
	equal(t, "kept: revision", kept.Revision, "rev2")
	equal(t, "kept: definition", kept.DefinitionID, d2.ID)
	equal(t, "kept: overlap", kept.Overlap, "allow")
	jsonEqual(t, "kept: input", kept.Input, `{"n":2}`)
	equal(t, "kept: last tick", kept.LastTickAt.Equal(tick), true)
	equal(t, "kept: next fire", kept.NextFireAt.Equal(tick.Add(time.Hour)), true)
	equal(t, "kept: anchor", kept.AnchorAt.Equal(got[0].AnchorAt), true)
	if kept.LastRunID == "" {
		t.Error("kept: lost its last run")
	}
	if kept.Version <= got[0].Version+1 {
		t.Errorf("kept: version %d, want above %d", kept.Version, got[0].Version+1)
	}
	equal(t, "fresh: cron", fresh.Cron, "0 10 * * *")
	if !fresh.LastTickAt.IsZero() || !fresh.NextFireAt.IsZero() {
		t.Errorf("a schedule whose cron changed kept its ticks: %s", dump(fresh))
	}
	// Re-applying rev1 makes it current again: its schedules come back.
	h.putSchedules("ws-a", "rev1", spec("@every 1s"), spec("0 9 * * *"), spec("@hourly"))
	equal(t, "schedules after rev1 again", len(h.schedules("ws-a")), 3)
	// A revision without schedules removes them.
	h.putSchedules("ws-a", "rev3")
	equal(t, "schedules after rev3", len(h.schedules("ws-a")), 0)
	equal(t, "ws-b untouched", len(h.schedules("ws-b")), 1)

	bad := spec("@hourly")
	bad.Overlap = "queue"
	_, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{WorkspaceID: "ws-a", Name: "wf", Revision: "rev4",
		Spec: json.RawMessage(`{}`), Schedules: []state.ScheduleSpec{bad}})
	wantErrIs(t, "a bad overlap", err, starflowtype.ErrInvalid)
	if _, err := h.a.GetDefinition(h.ctx(), &state.GetDefinitionParams{WorkspaceID: "ws-a", Name: "wf", Revision: "rev4"}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("a refused revision was stored: %v", err)
	}
}

func (s *suite) testSchedulesPause(t *testing.T) {
	t.Parallel()
	h := s.scheduled(t)
	_, err := h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-a", Workflow: "wf", Paused: true})
	wantErrIs(t, "pausing an unknown workflow", err, starflowtype.ErrNotFound)
	h.putSchedules("ws-a", "rev1", spec("@every 1s"))
	h.putSchedules("ws-b", "rev1", spec("@every 1s"))
	_, err = h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-c", Workflow: "wf", Paused: true})
	wantErrIs(t, "pausing another workspace's workflow", err, starflowtype.ErrNotFound)
	due := func() int {
		t.Helper()
		out, now, err := h.a.DueSchedules(h.ctx(), &state.DueSchedulesParams{})
		if err != nil {
			t.Fatalf("DueSchedules: %v", err)
		}
		near(t, "DueSchedules' now", now, time.Now(), clockSlack)
		return len(out)
	}
	equal(t, "due before the pause", due(), 2)
	before := h.schedules("ws-a")[0]
	out, err := h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-a", Workflow: "wf", Paused: true})
	if err != nil || len(out) != 1 || !out[0].Paused {
		t.Fatalf("PauseSchedules: %s, %v", dump(out), err)
	}
	if _, err := h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-a", Workflow: "wf", Paused: true}); err != nil {
		t.Errorf("pausing twice: %v", err)
	}
	equal(t, "due while ws-a's is paused", due(), 1)
	equal(t, "ws-b's not paused", h.schedules("ws-b")[0].Paused, false)
	_, err = h.a.FireSchedule(h.ctx(), &state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Version: before.Version,
		Next: time.Now().Add(time.Hour)})
	wantErrIs(t, "firing a paused schedule", err, starflowtype.ErrConflict)
	// The pause outlives a new revision.
	h.putSchedules("ws-a", "rev2", spec("@every 2s"), spec("@hourly"))
	for _, sc := range h.schedules("ws-a") {
		equal(t, "paused after a new revision", sc.Paused, true)
	}
	equal(t, "due after the new revision", due(), 1)
	time.Sleep(20 * time.Millisecond) // the resume's anchor is later than the revision's
	out, err = h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-a", Workflow: "wf", Paused: false})
	if err != nil || len(out) != 2 || out[0].Paused {
		t.Fatalf("resume: %s, %v", dump(out), err)
	}
	if !out[1].AnchorAt.After(h.schedules("ws-b")[0].AnchorAt) || !out[1].NextFireAt.IsZero() {
		t.Errorf("a resume re-anchors at now: %s", dump(out[1]))
	}
	equal(t, "due after the resume", due(), 3)
	again, err := h.a.PauseSchedules(h.ctx(), &state.PauseSchedulesParams{WorkspaceID: "ws-a", Workflow: "wf", Paused: false})
	if err != nil || again[0].Version != out[0].Version {
		t.Errorf("resuming a running workflow changed it: %s, %v", dump(again), err)
	}
}

func (s *suite) testSchedulesFire(t *testing.T) {
	t.Parallel()
	h := s.scheduled(t)
	h.putSchedules("ws-a", "rev1", spec("@every 1s"))
	due, now, err := h.a.DueSchedules(h.ctx(), &state.DueSchedulesParams{})
	if err != nil || len(due) != 1 {
		t.Fatalf("DueSchedules: %s, %v", dump(due), err)
	}
	sc := due[0]
	// The first pass only computes the next fire time.
	next := now.Truncate(time.Second).Add(time.Second)
	res := h.fireSchedule(state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Version: sc.Version, Next: next})
	if res.Run != nil || !res.Schedule.NextFireAt.Equal(next) || !res.Schedule.LastTickAt.IsZero() || res.Schedule.Version != sc.Version+1 {
		t.Fatalf("computing the next fire time: %s", dump(res))
	}
	_, err = h.a.FireSchedule(h.ctx(), &state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Version: sc.Version, Next: next})
	wantErrIs(t, "a write with a stale version", err, starflowtype.ErrConflict)
	eventually(t, "the schedule to fall due", func() bool {
		d, _, err := h.a.DueSchedules(h.ctx(), &state.DueSchedulesParams{})
		return err == nil && len(d) == 1
	})
	// Two schedulers fire the same tick at once: one run, one conflict.
	sc = res.Schedule
	var wg sync.WaitGroup
	results := make([]*state.FireResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = h.a.FireSchedule(h.ctx(), &state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf",
				Version: sc.Version, Tick: next, Next: next.Add(time.Second), Run: tickRun(sc, next), Overlap: "allow"})
		})
	}
	wg.Wait()
	var fired *state.FireResult
	for i, err := range errs {
		switch {
		case err == nil && fired == nil:
			fired = results[i]
		case err == nil:
			t.Errorf("two schedulers fired one tick: runs %s and %s", fired.Run.ID, results[i].Run.ID)
		case !errors.Is(err, starflowtype.ErrConflict):
			t.Errorf("FireSchedule: %v", err)
		}
	}
	if fired == nil || fired.Run == nil {
		t.Fatalf("no scheduler fired the tick: %v", errs)
	}
	run := h.getRun(fired.Run.ID)
	equal(t, "trigger", run.TriggerType, starflowtype.TriggerSchedule)
	equal(t, "workspace", run.WorkspaceID, "ws-a")
	equal(t, "env", run.Env, "staging")
	equal(t, "revision", run.WorkflowRevision, "rev1")
	equal(t, "idempotency key", run.IdempotencyKey, "schedule/wf/"+next.Format(time.RFC3339))
	jsonEqual(t, "input", run.Input, `{"n":1}`)
	stored := h.schedules("ws-a")[0]
	equal(t, "last run", stored.LastRunID, run.ID)
	equal(t, "last tick", stored.LastTickAt.Equal(next), true)
	equal(t, "next fire", stored.NextFireAt.Equal(next.Add(time.Second)), true)
	runs, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{WorkspaceID: "ws-a"})
	if err != nil || len(runs) != 1 {
		t.Errorf("runs after one tick: %d, %v", len(runs), err)
	}
	// A catch-up advance: a tick without a run.
	res = h.fireSchedule(state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Version: stored.Version,
		Tick: next.Add(5 * time.Second), Next: next.Add(6 * time.Second)})
	if res.Run != nil || res.Schedule.LastRunID != run.ID || !res.Schedule.LastTickAt.Equal(next.Add(5*time.Second)) {
		t.Errorf("a tick without a run: %s", dump(res))
	}
}

func (s *suite) testSchedulesOverlap(t *testing.T) {
	t.Parallel()
	h := s.scheduled(t)
	h.putSchedules("ws-a", "rev1", spec("@every 1s"))
	tick := time.Now().UTC().Truncate(time.Second)
	n := 0
	fire := func(overlap string) *state.FireResult {
		t.Helper()
		sc := h.schedules("ws-a")[0]
		n++
		at := tick.Add(time.Duration(n) * time.Second)
		return h.fireSchedule(state.FireScheduleParams{WorkspaceID: "ws-a", Workflow: "wf", Version: sc.Version, Tick: at,
			Next: at.Add(time.Second), Run: tickRun(sc, at), Overlap: overlap})
	}
	first := fire("skip")
	if first.Run == nil || first.Skipped || first.PreviousRunID != "" {
		t.Fatalf("the first tick: %s", dump(first))
	}
	skipped := fire("skip")
	if skipped.Run != nil || !skipped.Skipped || skipped.PreviousRunID != first.Run.ID || skipped.Schedule.LastRunID != first.Run.ID {
		t.Fatalf("skip while the previous run is queued: %s", dump(skipped))
	}
	allowed := fire("allow")
	if allowed.Run == nil || allowed.Run.ID == first.Run.ID || allowed.Cancelled != nil {
		t.Fatalf("allow: %s", dump(allowed))
	}
	equal(t, "the first run still queued", h.getRun(first.Run.ID).Status, starflowtype.RunQueued)
	// cancel_previous: a queued previous run is cancelled at once.
	replaced := fire("cancel_previous")
	if replaced.Run == nil || replaced.Cancelled == nil || replaced.Cancelled.ID != allowed.Run.ID {
		t.Fatalf("cancel_previous: %s", dump(replaced))
	}
	equal(t, "cancelled previous", h.getRun(allowed.Run.ID).Status, starflowtype.RunCancelled)
	evs := h.events(allowed.Run.ID)
	equal(t, "cancelled by", payloadField(t, evs[len(evs)-1], "by"), any("schedule"))
	// A running previous run is asked to stop at its next step.
	if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: first.Run.ID}); err != nil {
		t.Fatal(err)
	}
	_, _ = h.claimAndStart(replaced.Run.ID, runnerA)
	again := fire("cancel_previous")
	if again.Cancelled == nil || !h.getRun(replaced.Run.ID).CancelRequested || h.getRun(replaced.Run.ID).Status != starflowtype.RunRunning {
		t.Fatalf("cancel_previous of a running run: %s", dump(again))
	}
	// skip after the previous run ended: a run.
	if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: again.Run.ID}); err != nil {
		t.Fatal(err)
	}
	if after := fire("skip"); after.Run == nil || after.Skipped {
		t.Errorf("skip after the previous run ended: %s", dump(after))
	}
}
