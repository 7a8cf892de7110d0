package storecore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// DueSchedulesLimitDefault bounds one DueSchedules read.
const DueSchedulesLimitDefault = 500

// putSchedules replaces the schedules of workflow name (workspace ws) with
// those of the revision becoming current, in PutDefinition's transaction
// (state.PutDefinitionParams.Schedules).
func (t *txn) putSchedules(ctx context.Context, ws string, p *state.PutDefinitionParams) error {
	var defID string
	if err := t.tx.QueryRow(ctx, "get_definition_by_revision", ws, p.Name, p.Revision).Scan(&defID, new(string), new(string),
		new(string), new([]byte), new(string), new(time.Time)); err != nil {
		return fmt.Errorf("read back definition: %w", err)
	}
	env := orDefault(p.Env, state.DefaultEnv)
	for i, sc := range p.Schedules {
		if err := checkScheduleSpec(i, sc); err != nil {
			return err
		}
		if _, err := t.tx.Exec(ctx, "schedule_put", ws, p.Name, i, env, defID, p.Revision, sc.Cron, sc.Timezone,
			sc.Overlap, sc.Catchup, string(jsonOr(sc.Input, "{}"))); err != nil {
			return fmt.Errorf("schedule %d: %w", i, err)
		}
	}
	_, err := t.tx.Exec(ctx, "schedules_trim", ws, p.Name, len(p.Schedules))
	return err
}

// checkScheduleSpec refuses what the table's checks would, with a clear
// error.
func checkScheduleSpec(i int, sc state.ScheduleSpec) error {
	switch {
	case sc.Cron == "":
		return starflowtype.Invalid(fmt.Errorf("schedule %d: the cron expression is required", i))
	case sc.Timezone == "":
		return starflowtype.Invalid(fmt.Errorf("schedule %d: the timezone is required (UTC by default)", i))
	case sc.Overlap != "skip" && sc.Overlap != "allow" && sc.Overlap != "cancel_previous":
		return starflowtype.Invalid(fmt.Errorf("schedule %d: overlap %q is not skip, allow or cancel_previous", i, sc.Overlap))
	case sc.Catchup != "none" && sc.Catchup != "last" && sc.Catchup != "all":
		return starflowtype.Invalid(fmt.Errorf("schedule %d: catchup %q is not none, last or all", i, sc.Catchup))
	}
	return nil
}

// ListSchedules implements state.Schedules.
func (s *Store) ListSchedules(ctx context.Context, p *state.ListSchedulesParams) ([]*starflowtype.Schedule, time.Time, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, now, s.errorf("list schedules: %w", err)
	}
	rows, err := s.reader().Query(ctx, "list_schedules", p.WorkspaceID, p.Workflow)
	if err != nil {
		return nil, now, s.errorf("list schedules: %w", err)
	}
	out, err := scanSchedules(rows)
	if err != nil {
		return nil, now, s.errorf("list schedules: %w", err)
	}
	return out, now, nil
}

// PauseSchedules implements state.Schedules.
func (s *Store) PauseSchedules(ctx context.Context, p *state.PauseSchedulesParams) ([]*starflowtype.Schedule, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	_, err := s.write(ctx, state.OpPauseSchedules, "", false, func(t *txn) error {
		var exists bool
		if err := t.tx.QueryRow(ctx, "definition_exists", ws, p.Workflow).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("workflow %q: %w", p.Workflow, starflowtype.ErrNotFound)
		}
		if p.Paused {
			_, err := t.tx.Exec(ctx, "schedules_pause", ws, p.Workflow)
			return err
		}
		n, err := t.tx.Exec(ctx, "schedules_unpause", ws, p.Workflow)
		if err != nil || n == 0 {
			return err
		}
		_, err = t.tx.Exec(ctx, "schedules_reanchor", ws, p.Workflow)
		return err
	})
	if err != nil {
		return nil, s.errorf("pause schedules: %w", err)
	}
	out, _, err := s.ListSchedules(ctx, &state.ListSchedulesParams{WorkspaceID: ws, Workflow: p.Workflow})
	return out, err
}

// DueSchedules implements state.Schedules.
func (s *Store) DueSchedules(ctx context.Context, p *state.DueSchedulesParams) ([]*starflowtype.Schedule, time.Time, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = DueSchedulesLimitDefault
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, now, s.errorf("due schedules: %w", err)
	}
	rows, err := s.reader().Query(ctx, "due_schedules", limit)
	if err != nil {
		return nil, now, s.errorf("due schedules: %w", err)
	}
	out, err := scanSchedules(rows)
	if err != nil {
		return nil, now, s.errorf("due schedules: %w", err)
	}
	return out, now, nil
}

// FireSchedule implements state.Schedules.
func (s *Store) FireSchedule(ctx context.Context, p *state.FireScheduleParams) (*state.FireResult, error) {
	var e *enqueue
	if p.Run != nil {
		var err error
		if e, err = newEnqueue(p.Run); err != nil {
			return nil, s.errorf("fire schedule %s/%d: %w", p.Workflow, p.Index, err)
		}
	}
	var res *state.FireResult
	_, err := s.write(ctx, state.OpFireSchedule, "", false, func(t *txn) error {
		res = &state.FireResult{}
		sc, err := scanSchedule(t.tx.QueryRow(ctx, "schedule_advance", p.WorkspaceID, p.Workflow, p.Index, p.Version,
			instant(p.Tick), instant(p.Next)))
		if isNoRows(err) {
			return fmt.Errorf("schedule %s/%d is not at version %d any more (fired, replaced, paused or removed): %w",
				p.Workflow, p.Index, p.Version, starflowtype.ErrConflict)
		}
		if err != nil {
			return err
		}
		res.Schedule, res.PreviousRunID = sc, sc.LastRunID
		if e == nil {
			return nil
		}
		if prev := sc.LastRunID; prev != "" && p.Overlap != "allow" {
			m, status, claim, _, err := t.runState(ctx, sc.WorkspaceID, prev)
			switch {
			case errors.Is(err, starflowtype.ErrNotFound): // removed by retention: it ended
			case err != nil:
				return err
			case status.Terminal():
			case p.Overlap == "skip":
				res.Skipped = true
				return nil
			default: // cancel_previous
				if err := t.cancelBySchedule(ctx, m, claim); err != nil {
					return err
				}
				if res.Cancelled, err = getRun(ctx, t.tx, "", m.id); err != nil {
					return err
				}
				t.ch.Runs = append(t.ch.Runs, res.Cancelled)
			}
		}
		if err := e.write(ctx, p.Run)(t); err != nil {
			return err
		}
		t.idle = false // the schedule's own rows changed, and a cancel may have
		runID := t.ch.RunID
		if t.ch.Run != nil {
			runID = t.ch.Run.ID
		}
		if _, err := t.tx.Exec(ctx, "schedule_last_run", p.WorkspaceID, p.Workflow, p.Index, runID); err != nil {
			return err
		}
		res.Schedule.LastRunID = runID
		if t.ch.Run == nil { // a duplicate: the receipt's run answers
			if t.ch.Run, err = getRun(ctx, t.tx, "", runID); err != nil {
				return err
			}
		}
		res.Run = t.ch.Run
		return nil
	})
	if err != nil {
		return nil, s.errorf("fire schedule %s/%d: %w", p.Workflow, p.Index, err)
	}
	if res.Run != nil {
		run := *res.Run // the caller's copy: hooks keep theirs
		res.Run = &run
	}
	return res, nil
}

// cancelBySchedule cancels run m (cancel_previous), as an operator's
// CancelRun does: at once when it is not executing (run_cancelled with
// {"by": "schedule"}), else with cancel_requested; its children too.
func (t *txn) cancelBySchedule(ctx context.Context, m runMeta, claim starflowtype.ClaimState) error {
	if err := t.cancelOne(ctx, m, claim, "schedule"); err != nil {
		return err
	}
	return t.cancelChildren(ctx, m.id)
}

// now reads the database's clock.
func (s *Store) now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.reader().QueryRow(ctx, "now").Scan(&now); err != nil {
		return now, err
	}
	return now.UTC(), nil
}

// scanSchedules reads schedule rows (list_schedules' columns) and closes
// rows.
func scanSchedules(rows Rows) ([]*starflowtype.Schedule, error) {
	defer rows.Close()
	var out []*starflowtype.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// scanSchedule reads one row of list_schedules' columns.
func scanSchedule(row Row) (*starflowtype.Schedule, error) {
	var sc starflowtype.Schedule
	var input []byte
	if err := row.Scan(&sc.WorkspaceID, &sc.Env, &sc.Workflow, &sc.Index, &sc.Revision, &sc.DefinitionID,
		&sc.Cron, &sc.Timezone, &sc.Overlap, &sc.Catchup, &input, &sc.Paused,
		&sc.AnchorAt, &sc.LastTickAt, &sc.NextFireAt, &sc.LastRunID, &sc.Version, &sc.UpdatedAt); err != nil {
		return nil, err
	}
	sc.Input = input
	return &sc, nil
}
