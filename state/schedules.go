package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Schedules is the cold side of workflow schedules (issue 15): the
// workflow_schedules rows a definition's schedules become, the
// per-workflow pause, and the scheduler's reads and its one write per
// tick. Every Adapter implements it; nullstore refuses with
// ErrSchedulesNeedStore. Times come from the database clock.
//
// PutDefinition replaces the workflow's schedules with
// PutDefinitionParams.Schedules in its own transaction (see there).
type Schedules interface {
	// ListSchedules lists the schedules of p.WorkspaceID ("" = every
	// workspace), of one workflow when p.Workflow is set, by workflow then
	// index, with the database's now.
	ListSchedules(ctx context.Context, p *ListSchedulesParams) ([]*starflowtype.Schedule, time.Time, error)
	// PauseSchedules pauses (p.Paused) or resumes the schedules of one
	// workflow. The pause is per workflow: it covers the schedules of
	// every revision applied later, until resumed. A resume re-anchors
	// the workflow's schedules at the database's now, so ticks that fell
	// due while paused never fire. Pausing a paused workflow (or resuming
	// a running one) changes nothing. ErrNotFound when the workspace has
	// no definition of that name. Returns the workflow's schedules as
	// written.
	PauseSchedules(ctx context.Context, p *PauseSchedulesParams) ([]*starflowtype.Schedule, error)
	// DueSchedules lists up to p.Limit (default 500) schedules of every
	// workspace that are not paused and whose next fire time has come or
	// was never computed, by next fire time, with the database's now.
	DueSchedules(ctx context.Context, p *DueSchedulesParams) ([]*starflowtype.Schedule, time.Time, error)
	// FireSchedule advances one schedule by one step, in one transaction
	// conditioned on the schedule's version (a compare-and-set: two
	// schedulers, or a replaced or paused schedule, never both write):
	// last_tick_at = p.Tick (unless zero), next_fire_at = p.Next, and,
	// with p.Run, the tick's run enqueued in the same transaction —
	// unless the overlap rule says otherwise: with overlap skip, a
	// previous run of the schedule that has not ended means no run for
	// the tick (FireResult.Skipped); with cancel_previous that run is
	// cancelled (as CancelRun would) before the new one is enqueued.
	// Returns ErrConflict, having written nothing, when the schedule's
	// version is not p.Version any more, or it is paused or gone.
	FireSchedule(ctx context.Context, p *FireScheduleParams) (*FireResult, error)
}

// ErrSchedulesNeedStore is what an adapter that keeps nothing (nullstore)
// returns from the Schedules methods: it wraps ErrNotImplemented.
var ErrSchedulesNeedStore = fmt.Errorf("schedules need a durable store (sqlite or postgres): %w", ErrNotImplemented)

// ScheduleSpec is one schedule of a definition revision, as PutDefinition
// stores it (the workflow package's Schedule, its defaults applied).
type ScheduleSpec struct {
	Cron     string
	Timezone string // IANA zone; "UTC" when the definition gave none
	Overlap  string // skip | allow | cancel_previous
	Catchup  string // none | last | all
	Input    json.RawMessage
}

// ListSchedulesParams selects schedules.
type ListSchedulesParams struct {
	WorkspaceID string // "" = every workspace
	Workflow    string // "" = every workflow
}

// PauseSchedulesParams pauses or resumes one workflow's schedules.
type PauseSchedulesParams struct {
	WorkspaceID string
	Workflow    string
	Paused      bool
}

// DueSchedulesParams bounds one scheduler read.
type DueSchedulesParams struct {
	// Limit bounds the schedules returned. Default 500.
	Limit int
}

// FireScheduleParams is one scheduler write (see Schedules.FireSchedule).
type FireScheduleParams struct {
	WorkspaceID string
	Workflow    string
	Index       int
	// Version is the schedule's version as read: the write happens only
	// while it is still that.
	Version int64
	// Tick is the tick handled (zero: none, only Next changes).
	Tick time.Time
	// Next is the schedule's next tick after this write.
	Next time.Time
	// Run, when set, is the tick's run (TriggerType schedule, an
	// IdempotencyKey naming the tick); nil advances the schedule
	// without a run (a tick skipped by catchup).
	Run *EnqueueRunParams
	// Overlap is the schedule's overlap rule for Run: skip, allow or
	// cancel_previous.
	Overlap string
}

// FireResult is what FireSchedule did.
type FireResult struct {
	// Schedule is the schedule as written.
	Schedule *starflowtype.Schedule
	// Run is the run enqueued for the tick; nil when none was.
	Run *starflowtype.Run
	// Skipped: overlap skip found the previous run still going
	// (PreviousRunID), so the tick has no run.
	Skipped bool
	// Cancelled is the previous run cancel_previous cancelled (or asked
	// to stop, when it was executing); nil when there was none to cancel.
	Cancelled *starflowtype.Run
	// PreviousRunID is the schedule's previous run, "" when none.
	PreviousRunID string
}
