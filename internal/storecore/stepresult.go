package storecore

import (
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// ScanStepWrite reads into w the result row of a dialect's one-statement
// step write (a StepBatcher's) of run id. The row's columns, in order:
// fenced (bool: the fence matched), the run's workspace_id, env, attempt
// and cancel_requested; with w.WantRun the run_columns of the run as
// written; has_step (bool: the step row changed), the step_columns of the
// row as written, the step's status before the write (NULL: no row), the
// appended events' ids (an array, in order) and their created_at. Every
// column after fenced is NULL when the fence matched nothing, the run's
// and the step's when the step row did not change.
func ScanStepWrite(r Row, id string, w *StepWrite) error {
	var (
		fenced, hasStep bool
		ws, env, prior  *string
		attempt         *int
		cancel          *bool
		eventIDs        []int64
		eventsAt        *time.Time
	)
	dest := []any{&fenced, &ws, &env, &attempt, &cancel}
	var run *starflowtype.Run
	var runDest []any
	if w.WantRun {
		run = &starflowtype.Run{}
		var fix func()
		runDest, fix = nullable(runFields(run))
		defer fix() // before the return below, after the scan
		dest = append(dest, runDest...)
	}
	step := &starflowtype.Step{}
	stepDest, fixStep := nullable(stepFields(step))
	dest = append(append(append(dest, &hasStep), stepDest...), &prior, &eventIDs, &eventsAt)
	if err := r.Scan(dest...); err != nil {
		return fmt.Errorf("step write %s/%s: %w", w.Key.ScopePath, w.Key.StepID, err)
	}
	if !fenced {
		return nil
	}
	w.Fenced, w.Cancel = true, *cancel
	if run == nil || !hasStep {
		// Without the step row's change the run row was not written (u).
		run = &starflowtype.Run{ID: id, WorkspaceID: *ws, Env: *env, Attempt: *attempt, CancelRequested: *cancel}
	}
	w.Run = run
	if prior != nil {
		w.Prior = starflowtype.StepStatus(*prior)
	}
	if hasStep {
		fixStep()
		w.Changed, w.Step = true, step
		w.EventIDs = eventIDs
		if eventsAt != nil {
			w.EventsAt = eventsAt.UTC()
		}
	}
	return nil
}

// runFields are the destinations of the dialects' run_columns, in order
// (the enums as *string).
func runFields(r *starflowtype.Run) []any {
	return []any{&r.ID, &r.WorkspaceID, &r.Env, &r.DefinitionID, &r.WorkflowName,
		&r.WorkflowRevision, &r.TemplateID, (*string)(&r.Status), (*string)(&r.ClaimState), &r.RunnerPool,
		&r.Priority, &r.LeasedBy, &r.LeaseUntil, &r.LeaseEpoch, &r.LastHeartbeat, &r.ClaimAttempts,
		&r.Attempt, &r.MaxAttempts, &r.AvailableAt, (*string)(&r.RecoveryMode), (*string)(&r.TriggerType), &r.ParentRunID,
		&r.IdempotencyKey, (*[]byte)(&r.Input), (*[]byte)(&r.Output), (*[]byte)(&r.Checkpoint), &r.Phase,
		&r.Error, &r.DeadLettered, &r.CancelRequested, &r.CreatedAt, &r.StartedAt, &r.CompletedAt,
		&r.DurationMS, &r.UpdatedAt, &r.AttemptStartedAt, (*[]byte)(&r.ErrorDetail), &r.TraceID, &r.TraceParent, &r.Depth}
}

// stepFields are the destinations of the dialects' step_columns, in order.
func stepFields(s *starflowtype.Step) []any {
	return []any{&s.RunID, &s.Attempt, &s.ScopePath, &s.StepID, &s.Kind, (*string)(&s.Status), &s.Tries,
		&s.StartedAt, &s.FinishedAt, &s.DurationMS, &s.Error, &s.UpdatedAt}
}

// nullable wraps destinations of a row that may be all NULL (a LEFT JOIN
// that matched nothing) in pointer holders; the returned function copies
// what was read into them (NULL leaves the zero value; times as UTC).
func nullable(dest []any) ([]any, func()) {
	out := make([]any, len(dest))
	fixes := make([]func(), 0, len(dest))
	for i, d := range dest {
		var fix func()
		switch p := d.(type) {
		case *string:
			out[i], fix = hold(p, nil)
		case *int:
			out[i], fix = hold(p, nil)
		case *int64:
			out[i], fix = hold(p, nil)
		case *bool:
			out[i], fix = hold(p, nil)
		case *time.Time:
			out[i], fix = hold(p, time.Time.UTC)
		case *[]byte:
			out[i], fix = p, func() {} // NULL is nil
		default:
			panic(fmt.Sprintf("storecore: nullable: unsupported destination %T", d))
		}
		fixes = append(fixes, fix)
	}
	return out, func() {
		for _, f := range fixes {
			f()
		}
	}
}

// hold is a nullable holder of p and the function that copies a non-NULL
// value into p (through conv, when given).
func hold[T any](p *T, conv func(T) T) (any, func()) {
	h := new(*T)
	return h, func() {
		if *h != nil {
			v := **h
			if conv != nil {
				v = conv(v)
			}
			*p = v
		}
	}
}
