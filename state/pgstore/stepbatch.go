package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
)

// stepQuery names the one-statement form of each step write.
var stepQuery = map[storecore.StepOp]string{
	storecore.StepStart:        "sw_start",
	storecore.StepStartSucceed: "sw_start_succeed",
	storecore.StepRetry:        "sw_retry",
	storecore.StepSucceed:      "sw_succeed",
	storecore.StepFail:         "sw_fail",
	storecore.StepSkip:         "sw_skip",
}

// stepEvents are the events each one-statement step write appends, in
// order (the statements name them; the core's StepWrite must agree).
var stepEvents = map[storecore.StepOp][]starflowtype.EventType{
	storecore.StepStart:        {starflowtype.EventNodeStart},
	storecore.StepStartSucceed: {starflowtype.EventNodeStart, starflowtype.EventNodeComplete},
	storecore.StepRetry:        {starflowtype.EventNodeRetry},
	storecore.StepSucceed:      {starflowtype.EventNodeComplete},
	storecore.StepFail:         {starflowtype.EventNodeError},
	storecore.StepSkip:         {starflowtype.EventNodeSkipped},
}

// StepWrites implements storecore.StepBatcher: every write is one sw_*
// statement, and all of them go to the server in one pipeline (a pgx
// batch) inside t, so a batch of writes costs one round trip.
func (d *dialect) StepWrites(ctx context.Context, t storecore.Conn, ws []*storecore.StepWrite) error {
	b := &pgx.Batch{}
	c := t.(*tx)
	if c.lockTimeout != "" {
		b.Queue(setLockTimeout, c.lockTimeout) // in the pipeline: no round trip of its own
		c.lockTimeout = ""
	}
	for _, w := range ws {
		id, ok := storecore.CanonicalID(w.Key.RunID)
		if !ok {
			continue // no run has that id: not fenced
		}
		args, err := stepArgs(id, w)
		if err != nil {
			return err
		}
		name := stepQuery[w.Op]
		if w.WantRun {
			name += "_run"
		}
		b.Queue(query(name), args...).QueryRow(func(r pgx.Row) error { return scanStepWrite(r, id, w) })
	}
	if b.Len() == 0 {
		return nil
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("step writes: %w", translate(err))
	}
	return nil
}

// stepArgs are the arguments of w's sw_* statement (queries.sql).
func stepArgs(id string, w *storecore.StepWrite) ([]any, error) {
	want := stepEvents[w.Op]
	if len(w.Events) != len(want) {
		return nil, fmt.Errorf("step write %s: %d events, its statement appends %v", w.Key.StepID, len(w.Events), want)
	}
	payloads := make([]any, len(w.Events))
	for i, e := range w.Events {
		if e.Type != want[i] {
			return nil, fmt.Errorf("step write %s: event %s, its statement appends %v", w.Key.StepID, e.Type, want)
		}
		if len(e.Payload) > 0 {
			payloads[i] = string(e.Payload)
		}
	}
	args := []any{id, w.Lease.RunnerID, w.Lease.Epoch, w.Key.Attempt, w.Key.ScopePath, w.Key.StepID}
	switch w.Op {
	case storecore.StepStart:
		args = append(args, w.Kind, w.Try, w.RefuseCancelled, payloads[0])
	case storecore.StepStartSucceed:
		args = append(append(args, w.Kind, w.Try, w.RefuseCancelled, payloads[0], payloads[1]), checkpointArgs(w)...)
	case storecore.StepRetry:
		args = append(args, w.Try, w.Error, payloads[0])
	case storecore.StepSucceed:
		args = append(append(args, w.Try, payloads[0]), checkpointArgs(w)...)
	case storecore.StepFail:
		args = append(args, w.Kind, w.Try, w.Error, payloads[0])
	case storecore.StepSkip:
		args = append(args, w.Kind, payloads[0])
	}
	return args, nil
}

// checkpointArgs are a success's checkpoint and blob arguments.
func checkpointArgs(w *storecore.StepWrite) []any {
	var cp storecore.CheckpointIn
	if w.Checkpoint != nil {
		cp = *w.Checkpoint
	}
	sums := make([]string, len(w.Blobs))
	data := make([][]byte, len(w.Blobs))
	for i, bl := range w.Blobs {
		sums[i], data[i] = bl.Sum, bl.Data
	}
	return []any{string(cp.Context), string(cp.Output), nullText(cp.ContextBlob), nullText(cp.OutputBlob), sums, data}
}

// scanStepWrite reads an sw_* statement's result row into w.
func scanStepWrite(r pgx.Row, id string, w *storecore.StepWrite) error {
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
		return fmt.Errorf("step write %s/%s: %w", w.Key.ScopePath, w.Key.StepID, translate(err))
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

// runFields are the destinations of runColumns, in order, as the core's
// scanRun reads them (status and the other enums as *string).
func runFields(r *starflowtype.Run) []any {
	return []any{&r.ID, &r.WorkspaceID, &r.Env, &r.DefinitionID, &r.WorkflowName,
		&r.WorkflowRevision, &r.TemplateID, (*string)(&r.Status), (*string)(&r.ClaimState), &r.RunnerPool,
		&r.Priority, &r.LeasedBy, &r.LeaseUntil, &r.LeaseEpoch, &r.LastHeartbeat, &r.ClaimAttempts,
		&r.Attempt, &r.MaxAttempts, &r.AvailableAt, (*string)(&r.RecoveryMode), (*string)(&r.TriggerType), &r.ParentRunID,
		&r.IdempotencyKey, (*[]byte)(&r.Input), (*[]byte)(&r.Output), (*[]byte)(&r.Checkpoint), &r.Phase,
		&r.Error, &r.DeadLettered, &r.CancelRequested, &r.CreatedAt, &r.StartedAt, &r.CompletedAt,
		&r.DurationMS, &r.UpdatedAt, &r.AttemptStartedAt}
}

// stepFields are the destinations of stepColumns, in order.
func stepFields(s *starflowtype.Step) []any {
	return []any{&s.RunID, &s.Attempt, &s.ScopePath, &s.StepID, &s.Kind, (*string)(&s.Status), &s.Tries,
		&s.StartedAt, &s.FinishedAt, &s.DurationMS, &s.Error, &s.UpdatedAt}
}

// nullable wraps destinations of a row that may be all NULL (a LEFT JOIN
// that matched nothing) in pointer holders; the returned function copies
// what was read into them (NULL leaves the zero value; times as UTC).
func nullable(dest []any) ([]any, func()) {
	out := make([]any, len(dest))
	var fixes []func()
	for i, d := range dest {
		switch p := d.(type) {
		case *string:
			var h *string
			out[i] = &h
			fixes = append(fixes, func() { *p = deref(h) })
		case *int:
			var h *int
			out[i] = &h
			fixes = append(fixes, func() { *p = deref(h) })
		case *int64:
			var h *int64
			out[i] = &h
			fixes = append(fixes, func() { *p = deref(h) })
		case *bool:
			var h *bool
			out[i] = &h
			fixes = append(fixes, func() { *p = deref(h) })
		case *time.Time:
			var h *time.Time
			out[i] = &h
			fixes = append(fixes, func() {
				if h != nil {
					*p = h.UTC()
				}
			})
		case *[]byte:
			out[i] = p // NULL is nil
		default:
			panic(fmt.Sprintf("pgstore: nullable: unsupported destination %T", d))
		}
	}
	return out, func() {
		for _, f := range fixes {
			f()
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
