package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// Scheduler defaults (issue 15).
const (
	// SchedulerIntervalDefault is the time between scheduler passes.
	SchedulerIntervalDefault = time.Second
	// SchedulerBatchLimitDefault bounds the due schedules one pass reads.
	SchedulerBatchLimitDefault = 500
)

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// Interval between passes. Default 1 s: a tick fires at most about
	// Interval after it fell due. One pass also runs at Start.
	Interval time.Duration
	// LateAfter: a tick that fell due more than this long before the pass
	// that handles it is a missed tick, and the schedule's catchup rule
	// applies to it (as to every tick that fell due before this
	// scheduler's first pass). Default 2 × Interval.
	LateAfter time.Duration
	// BatchLimit bounds the due schedules one pass reads. Default 500;
	// the next pass takes the rest.
	BatchLimit int
	// Prepare builds the run of one tick of a schedule (the definition
	// of the schedule's revision, its input with the input schema's
	// defaults, TriggerType schedule, the tick's idempotency key).
	// Required. An error skips the tick (logged): a run that cannot be
	// enqueued now never will be.
	Prepare func(ctx context.Context, sc *starflowtype.Schedule, tick time.Time) (*state.EnqueueRunParams, error)
	// OnEnqueue, when set, is called after a pass enqueued runs, to wake
	// in-process runners at once.
	OnEnqueue func()
	// OnCancelled, when set, is called with the previous run a tick's
	// cancel_previous ended at once (no runner held it; a held one is
	// asked to stop, and its runner ends it), as written.
	OnCancelled func(*starflowtype.Run)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Scheduler is the schedules' maintenance service: every pass it reads
// the due schedules (DueSchedules, database clock) and, for each, works
// out the ticks that fell due since its last tick and fires them with
// FireSchedule — one transaction per tick, conditioned on the schedule's
// version, holding the tick's run — so several schedulers (two leaders
// overlapping for a moment, two processes) start exactly one run per
// tick: whichever writes second finds the version changed and stops.
//
// Ticks that fell due before this scheduler's first pass (every process
// was down, or another process led maintenance and stopped), or more
// than LateAfter before the pass, are missed: catchup none gives them no
// run (the newest is recorded as the last tick), last gives the newest
// one a run, all gives each a run — at most workflow.CatchupAllMax, the
// newest. Other ticks are on time and each gets a run.
type Scheduler struct {
	store state.Schedules
	cfg   SchedulerConfig
	*periodic

	passes int  // passes that read the due schedules
	off    bool // the store has no schedules (state.ErrNotImplemented)
}

// NewScheduler returns a scheduler over store. Errors: no Prepare.
func NewScheduler(store state.Schedules, cfg SchedulerConfig) (*Scheduler, error) {
	if cfg.Prepare == nil {
		return nil, errors.New("maintenance: SchedulerConfig.Prepare is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = SchedulerIntervalDefault
	}
	if cfg.LateAfter <= 0 {
		cfg.LateAfter = 2 * cfg.Interval
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = SchedulerBatchLimitDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{store: store, cfg: cfg}
	s.periodic = newPeriodic("scheduler", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := s.Pass(ctx)
		return err
	})
	return s, nil
}

// Fired is what a pass did for one tick.
type Fired struct {
	Workflow string
	Index    int
	Tick     time.Time
	// Run is the tick's run; nil when the tick had none (Reason says
	// why).
	Run *starflowtype.Run
	// Reason is why the tick had no run: "overlap" (overlap skip, the
	// previous run still going), "catchup" (a missed tick catchup gave no
	// run), "prepare" (its run could not be built: Err).
	Reason string
	// Cancelled is the previous run overlap cancel_previous cancelled.
	Cancelled *starflowtype.Run
	Err       error
}

// Pass fires every due tick now and returns what it did per tick. A
// schedule another scheduler advanced meanwhile is left to it; a store
// error on one schedule is returned (joined) after the others were
// handled.
func (s *Scheduler) Pass(ctx context.Context) ([]Fired, error) {
	if s.off {
		return nil, nil
	}
	due, now, err := s.store.DueSchedules(ctx, &state.DueSchedulesParams{Limit: s.cfg.BatchLimit})
	if errors.Is(err, state.ErrNotImplemented) {
		// nullstore: nothing can be scheduled; say so once.
		s.off = true
		s.cfg.Logger.Info("the store keeps no schedules: the scheduler is off", "reason", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	first := s.passes == 0
	s.passes++
	var out []Fired
	var errs []error
	enqueued := false
	for _, sc := range due {
		if ctx.Err() != nil {
			break
		}
		fired, err := s.schedule(ctx, sc, now, first)
		out = append(out, fired...)
		for _, f := range fired {
			enqueued = enqueued || f.Run != nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s/%s/%d: %w", sc.WorkspaceID, sc.Workflow, sc.Index, err))
		}
	}
	if enqueued && s.cfg.OnEnqueue != nil {
		s.cfg.OnEnqueue()
	}
	return out, errors.Join(errs...)
}

// schedule handles one due schedule: its ticks in (last tick or anchor,
// now], each fired or skipped in order, the version chained from write to
// write.
func (s *Scheduler) schedule(ctx context.Context, sc *starflowtype.Schedule, now time.Time, first bool) ([]Fired, error) {
	c, err := workflow.ParseCron(sc.Cron, sc.Timezone)
	if err != nil { // validated at apply: only a hand-edited row gets here
		return nil, fmt.Errorf("stored cron: %w", err)
	}
	base := sc.AnchorAt
	if sc.LastTickAt.After(base) {
		base = sc.LastTickAt
	}
	skipTo, fire := planTicks(c, sc.Catchup, base, now, now.Add(-s.cfg.LateAfter), first)

	version := sc.Version
	var out []Fired
	advance := func(p *state.FireScheduleParams) (*state.FireResult, bool, error) {
		p.WorkspaceID, p.Workflow, p.Index, p.Version, p.Overlap = sc.WorkspaceID, sc.Workflow, sc.Index, version, sc.Overlap
		res, err := s.store.FireSchedule(ctx, p)
		if errors.Is(err, starflowtype.ErrConflict) {
			return nil, false, nil // another scheduler (or a new revision, a pause) got there first
		}
		if err != nil {
			return nil, false, err
		}
		if c := res.Cancelled; c != nil && c.Status == starflowtype.RunCancelled && s.cfg.OnCancelled != nil {
			s.cfg.OnCancelled(c)
		}
		version = res.Schedule.Version
		return res, true, nil
	}
	if !skipTo.IsZero() {
		_, ok, err := advance(&state.FireScheduleParams{Tick: skipTo, Next: c.Next(skipTo)})
		if err != nil || !ok {
			return out, err
		}
		out = append(out, Fired{Workflow: sc.Workflow, Index: sc.Index, Tick: skipTo, Reason: "catchup"})
		s.cfg.Logger.Info("missed schedule ticks skipped (catchup)", "workspace", sc.WorkspaceID, "workflow", sc.Workflow,
			"schedule", sc.Index, "catchup", sc.Catchup, "newest_skipped", skipTo)
	}
	for _, tick := range fire {
		f := Fired{Workflow: sc.Workflow, Index: sc.Index, Tick: tick}
		p := &state.FireScheduleParams{Tick: tick, Next: c.Next(tick)}
		if p.Run, f.Err = s.cfg.Prepare(ctx, sc, tick); f.Err != nil {
			f.Reason = "prepare"
			p.Run = nil
			s.cfg.Logger.Warn("schedule tick skipped: its run cannot be enqueued", "workspace", sc.WorkspaceID,
				"workflow", sc.Workflow, "schedule", sc.Index, "tick", tick, "error", f.Err)
		}
		res, ok, err := advance(p)
		if err != nil || !ok {
			return out, err
		}
		f.Run, f.Cancelled = res.Run, res.Cancelled
		if res.Skipped {
			f.Reason = "overlap"
			s.cfg.Logger.Info("schedule tick skipped: the previous run has not ended (overlap skip)", "workspace", sc.WorkspaceID,
				"workflow", sc.Workflow, "schedule", sc.Index, "tick", tick, "previous_run_id", res.PreviousRunID)
		} else if res.Run != nil {
			s.cfg.Logger.Info("schedule fired", "workspace", sc.WorkspaceID, "workflow", sc.Workflow, "schedule", sc.Index,
				"tick", tick, "run_id", res.Run.ID)
		}
		out = append(out, f)
	}
	if len(fire) == 0 && skipTo.IsZero() {
		// Nothing fell due (a schedule seen for the first time, or one
		// another scheduler just fired): record its next fire time.
		next := c.Next(base)
		if !next.Equal(sc.NextFireAt) || sc.NextFireAt.IsZero() {
			if _, _, err := advance(&state.FireScheduleParams{Next: next}); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// planTicks decides the ticks of a schedule (catchup rule catchup) in
// (base, now]: skipTo is the newest missed tick that gets no run (zero:
// none), fire the ticks that get a run, oldest first. A tick is missed
// when first (the scheduler's first pass: no one handled ticks before
// it) or when it is not after late.
func planTicks(c *workflow.Cron, catchup string, base, now, late time.Time, first bool) (skipTo time.Time, fire []time.Time) {
	var missed, onTime []time.Time
	for _, t := range newestTicks(c, base, now, workflow.CatchupAllMax) {
		if first || !t.After(late) {
			missed = append(missed, t)
		} else {
			onTime = append(onTime, t)
		}
	}
	switch catchup {
	case workflow.CatchupNone:
		if len(missed) > 0 {
			skipTo = missed[len(missed)-1]
		}
	case workflow.CatchupAll:
		fire = missed
	default: // last: the newest missed tick; firing it passes the older ones
		if len(missed) > 0 {
			fire = missed[len(missed)-1:]
		}
	}
	return skipTo, append(fire, onTime...)
}

// newestTicks returns the newest ticks of c in (from, to], at most limit,
// oldest first. It enumerates only a window before to that holds about
// 2 × limit ticks (widened while it holds fewer and does not reach from),
// so a schedule of every second that was down for a year costs no more
// than one down for a minute.
func newestTicks(c *workflow.Cron, from, to time.Time, limit int) []time.Time {
	if !from.Before(to) {
		return nil
	}
	period := time.Hour
	if first := c.Next(to); !first.IsZero() {
		if second := c.Next(first); !second.IsZero() && second.After(first) {
			period = second.Sub(first)
		}
	}
	window := period * time.Duration(2*limit+2)
	for {
		start := from
		if window > 0 && to.Sub(from) > window {
			start = to.Add(-window)
		}
		var ticks []time.Time
		for t := c.Next(start); !t.IsZero() && !t.After(to); t = c.Next(t) {
			ticks = append(ticks, t)
			if len(ticks) > 2*limit {
				ticks = ticks[len(ticks)-limit:]
			}
		}
		if len(ticks) >= limit || start.Equal(from) {
			if len(ticks) > limit {
				ticks = ticks[len(ticks)-limit:]
			}
			return ticks
		}
		if window > time.Duration(1<<62)/4 {
			window = 0 // from is reached next time
		} else {
			window *= 4
		}
	}
}
