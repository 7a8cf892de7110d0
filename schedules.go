package starflow

import (
	"context"
	"fmt"
	"time"

	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// Schedule is one schedule of a workflow's current revision (issue 15):
// its stored state and the next times it fires.
type Schedule struct {
	starflowtype.Schedule
	// NextFireTimes are the schedule's next ticks (UTC), the first of
	// them perhaps already due and about to fire; empty while the
	// workflow is paused.
	NextFireTimes []time.Time `json:"next_fire_times"`
}

// ScheduleNextDefault is how many next fire times Schedules reports by
// default; ScheduleNextMax is the most it reports.
const (
	ScheduleNextDefault = 3
	ScheduleNextMax     = 50
)

// Schedules lists the schedules of the workspace of ctx (of one
// workflow when workflow is set), by workflow and index, each with its
// next next fire times (ScheduleNextDefault when next is 0, at most
// ScheduleNextMax). Errors: state.ErrSchedulesNeedStore on a store that
// is not durable.
func (e *Engine) Schedules(ctx context.Context, workflow string, next int) ([]*Schedule, error) {
	rows, now, err := e.store.ListSchedules(ctx, &state.ListSchedulesParams{WorkspaceID: e.workspace(ctx), Workflow: workflow})
	if err != nil {
		return nil, err
	}
	return withNextFires(rows, now, next), nil
}

// PauseSchedules pauses the schedules of one workflow of the workspace
// of ctx: no tick fires until ResumeSchedules, and the pause covers
// revisions applied meanwhile. It returns the workflow's schedules.
// Errors: ErrNotFound (no such workflow).
func (e *Engine) PauseSchedules(ctx context.Context, workflow string) ([]*Schedule, error) {
	return e.pauseSchedules(ctx, workflow, true)
}

// ResumeSchedules resumes the schedules of one workflow: ticks that fell
// due while it was paused never fire; the next tick after now does.
// Errors: ErrNotFound (no such workflow).
func (e *Engine) ResumeSchedules(ctx context.Context, workflow string) ([]*Schedule, error) {
	return e.pauseSchedules(ctx, workflow, false)
}

func (e *Engine) pauseSchedules(ctx context.Context, workflow string, paused bool) ([]*Schedule, error) {
	rows, err := e.store.PauseSchedules(ctx, &state.PauseSchedulesParams{WorkspaceID: e.workspace(ctx), Workflow: workflow, Paused: paused})
	if err != nil {
		return nil, err
	}
	return withNextFires(rows, time.Now().UTC(), 0), nil
}

// withNextFires adds the next fire times to each row: from its stored
// next fire time, or else from its last tick or anchor, and then the
// cron's following ticks.
func withNextFires(rows []*starflowtype.Schedule, now time.Time, next int) []*Schedule {
	if next <= 0 {
		next = ScheduleNextDefault
	}
	next = min(next, ScheduleNextMax)
	out := make([]*Schedule, 0, len(rows))
	for _, r := range rows {
		s := &Schedule{Schedule: *r, NextFireTimes: []time.Time{}}
		out = append(out, s)
		c, err := workflow.ParseCron(r.Cron, r.Timezone)
		if err != nil || r.Paused {
			continue
		}
		t := r.NextFireAt
		if t.IsZero() {
			base := r.AnchorAt
			if r.LastTickAt.After(base) {
				base = r.LastTickAt
			}
			t = c.Next(base)
		}
		for ; !t.IsZero() && len(s.NextFireTimes) < next; t = c.Next(t) {
			s.NextFireTimes = append(s.NextFireTimes, t)
		}
	}
	return out
}

// scheduleSpecs are the schedules of def as PutDefinition stores them,
// defaults filled in.
func scheduleSpecs(def *workflow.Definition) []state.ScheduleSpec {
	var out []state.ScheduleSpec
	for _, s := range def.Schedules {
		out = append(out, state.ScheduleSpec{Cron: s.Cron, Timezone: s.TimezoneOrDefault(), Overlap: s.OverlapOrDefault(),
			Catchup: s.CatchupOrDefault(), Input: s.InputJSON()})
	}
	return out
}

// ScheduleIdempotencyKey is the idempotency key of the run of one tick:
// schedule/<workflow>/<index>/<tick, RFC 3339 UTC>.
func ScheduleIdempotencyKey(workflow string, index int, tick time.Time) string {
	return fmt.Sprintf("schedule/%s/%d/%s", workflow, index, tick.UTC().Format(time.RFC3339))
}

// scheduledRun builds the run of one tick of sc as Enqueue would (the
// revision the schedule came from, the input with the input schema's
// defaults, checked), in the schedule's workspace and env, with trigger
// schedule and the tick's idempotency key.
func (e *Engine) scheduledRun(ctx context.Context, sc *starflowtype.Schedule, tick time.Time) (*state.EnqueueRunParams, error) {
	ctx = WithScope(ctx, Scope{Workspace: sc.WorkspaceID, Env: sc.Env})
	return e.enqueueParams(ctx, sc.Workflow, sc.Input, &EnqueueOptions{Revision: sc.Revision, Trigger: starflowtype.TriggerSchedule,
		IdempotencyKey: ScheduleIdempotencyKey(sc.Workflow, sc.Index, tick)})
}

// newScheduler is the scheduler of one maintenance term.
func (e *Engine) newScheduler() (*maintenance.Scheduler, error) {
	return maintenance.NewScheduler(e.store, maintenance.SchedulerConfig{
		Interval: e.cfg.ScheduleInterval, Prepare: e.scheduledRun, OnEnqueue: e.runner.Notify, Logger: e.cfg.Logger,
		OnCancelled: e.metrics.engine.RunWritten, // cancel_previous's ends
	})
}
