package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// releaseTimeout bounds the ClearLease written on shutdown.
const releaseTimeout = 5 * time.Second

// stepFailed is a step's terminal failure, as it propagates to the run.
type stepFailed struct {
	stepID string
	err    error
}

func (f *stepFailed) Error() string { return fmt.Sprintf("step %s: %v", f.stepID, f.err) }
func (f *stepFailed) Unwrap() error { return f.err }

// execList runs one steps list in scope and returns the output of its last
// step in list order. Steps start when their dependencies have finished: a
// step with run_after waits for the steps it names, one without it follows
// the step before it. This version runs ready steps one at a time, in list
// order; the ledger is the same when they run concurrently.
func (rs *runState) execList(ctx context.Context, scope string, list []*workflow.Step) (any, error) {
	st := rs.stepsVal()
	for _, s := range list {
		if _, ok := st[s.ID]; !ok {
			st[s.ID] = map[string]any{"status": "pending"}
		}
	}
	deps := make([][]string, len(list))
	for i := range list {
		deps[i] = workflow.DependsOn(list, i)
	}
	done := map[string]bool{}
	started := make([]bool, len(list))
	var last any
	for n := 0; n < len(list); n++ {
		next := -1
		for i := range list {
			if !started[i] && allDone(deps[i], done) {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, step.Permanent(fmt.Errorf("run_after cycle among the steps that have not run in scope %q", scope))
		}
		started[next] = true
		s := list[next]
		out, err := rs.execStep(ctx, scope, s)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, starflowtype.ErrLeaseLost) && !errors.Is(err, starflowtype.ErrCancelRequested) {
				if serr := rs.skipRemaining(ctx, scope, list, started, s.ID); serr != nil {
					return nil, serr
				}
			}
			return nil, err
		}
		done[s.ID] = true
		if next == len(list)-1 {
			last = out
		}
	}
	return last, nil
}

func allDone(ids []string, done map[string]bool) bool {
	for _, id := range ids {
		if !done[id] {
			return false
		}
	}
	return true
}

// skipRemaining records every step of the list that never started as
// skipped, because the failure of failedID ended the list.
func (rs *runState) skipRemaining(ctx context.Context, scope string, list []*workflow.Step, started []bool, failedID string) error {
	for i, s := range list {
		if started[i] {
			continue
		}
		if err := rs.led.nodeSkipped(ctx, scope, s.ID, s.Kind(), "step "+failedID+" failed"); err != nil {
			return err
		}
	}
	return nil
}

// execStep runs (or restores) one step instance and returns its stored
// output.
func (rs *runState) execStep(ctx context.Context, scope string, s *workflow.Step) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if draining(ctx) {
		return nil, ErrShutdown // stop at this step boundary; the lease is released
	}
	kind := s.Kind()
	entry := rs.stepsVal()
	if cp, ok := rs.restored[scope+"\x00"+s.ID]; ok {
		return rs.restore(s, cp)
	}
	if s.When != nil {
		ok, err := rs.evalWhen(ctx, s)
		if err != nil {
			ferr := step.Permanent(err)
			if werr := rs.led.nodeError(ctx, scope, s.ID, kind, 0, ferr); werr != nil {
				return nil, werr
			}
			return nil, &stepFailed{s.ID, ferr}
		}
		if !ok {
			entry[s.ID] = map[string]any{"status": string(starflowtype.StepSkipped)}
			return nil, rs.led.nodeSkipped(ctx, scope, s.ID, kind, "when is false")
		}
	}
	policy := resolveRetry(s, rs.def)
	timeout := rs.e.cfg.StepTimeout
	if rs.def.Defaults != nil && rs.def.Defaults.Timeout > 0 {
		timeout = time.Duration(rs.def.Defaults.Timeout)
	}
	if s.Timeout > 0 {
		timeout = time.Duration(s.Timeout)
	}
	for try := 1; ; try++ {
		if err := rs.led.nodeStart(ctx, scope, s.ID, kind, try); err != nil {
			return nil, err
		}
		tctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("step timed out after %s", timeout))
		raw, delta, err := rs.runKind(tctx, scope, s, try)
		if err == nil {
			var out any
			out, err = rs.shapeOutput(tctx, s, raw)
			if err == nil {
				cancel()
				// The handler's work is done: record it even if the runner is
				// stopping (a shutdown must not throw a finished step away).
				// The fence still refuses the write if the lease was lost.
				wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				err = rs.complete(wctx, scope, s, try, out, delta)
				wcancel()
				var bad unencodable
				if !errors.As(err, &bad) {
					return out, err
				}
				// The output cannot be stored: a permanent failure of the step.
				if werr := rs.led.nodeError(ctx, scope, s.ID, kind, try, err); werr != nil {
					return nil, werr
				}
				return nil, &stepFailed{s.ID, err}
			}
		}
		if tctx.Err() != nil && ctx.Err() == nil {
			err = context.Cause(tctx) // the step's own timeout: transient
		}
		cancel()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // lease lost or shutdown: not the step's failure
		}
		if !step.IsPermanent(err) && try < policy.maxTries {
			d := policy.delay(try)
			if werr := rs.led.nodeRetry(ctx, scope, s.ID, try, err, d); werr != nil {
				return nil, werr
			}
			rs.log.Info("step try failed; retrying", "step", s.ID, "try", try, "backoff", d, "error", rs.led.red.Error(err))
			if serr := rs.e.cfg.Sleep(ctx, d); serr != nil {
				return nil, serr
			}
			continue
		}
		if werr := rs.led.nodeError(ctx, scope, s.ID, kind, try, err); werr != nil {
			return nil, werr
		}
		entry[s.ID] = map[string]any{"status": string(starflowtype.StepFailed), "error": rs.led.red.Error(err)}
		return nil, &stepFailed{s.ID, err}
	}
}

// complete applies a succeeded step's output and context changes and
// commits them (ledger row, event and checkpoint in one transaction).
func (rs *runState) complete(ctx context.Context, scope string, s *workflow.Step, try int, out any, delta map[string]any) error {
	if err := rs.led.nodeComplete(ctx, scope, s.ID, try, out, delta); err != nil {
		return err
	}
	rs.apply(s.ID, out, delta)
	return rs.recordPhase(ctx)
}

// apply makes a step's output and context changes visible to later steps.
func (rs *runState) apply(stepID string, out any, delta map[string]any) {
	v := rs.vars()
	for k, x := range delta {
		v[k] = x
	}
	rs.stepsVal()[stepID] = map[string]any{"status": string(starflowtype.StepSucceeded), "output": out}
}

// restore applies a checkpoint instead of executing the step.
func (rs *runState) restore(s *workflow.Step, cp *starflowtype.Checkpoint) (any, error) {
	out, err := jsonvalue.Decode(cp.Output)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of step %s: output: %w", s.ID, err)
	}
	var delta map[string]any
	if len(cp.Context) > 0 {
		d, err := jsonvalue.Decode(cp.Context)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of step %s: context: %w", s.ID, err)
		}
		delta, _ = d.(map[string]any)
	}
	rs.apply(s.ID, out, delta)
	return out, nil
}

// recordPhase writes a phase event when variables.phase changed.
func (rs *runState) recordPhase(ctx context.Context) error {
	p, ok := rs.vars()["phase"].(string)
	if !ok || p == rs.phase {
		return nil
	}
	rs.phase = p
	return rs.led.phase(ctx, p)
}

func (rs *runState) evalWhen(ctx context.Context, s *workflow.Step) (bool, error) {
	tpl, err := rs.e.cfg.Expr.ParseExpr(s.When)
	if err != nil {
		return false, fmt.Errorf("when: %w", err)
	}
	v, err := rs.e.cfg.Expr.EvalTemplate(ctx, tpl, rs.ctxVal)
	if err != nil {
		return false, fmt.Errorf("when: %w", err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("when must be a boolean, got %T", v)
	}
	return b, nil
}

// shapeOutput applies the step's `output` expression to its raw output.
func (rs *runState) shapeOutput(ctx context.Context, s *workflow.Step, raw any) (any, error) {
	if s.Output == nil {
		return raw, nil
	}
	tpl, err := rs.e.cfg.Expr.ParseTemplate(s.Output)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("output: %w", err))
	}
	vars := make(map[string]any, len(rs.ctxVal)+1)
	for k, v := range rs.ctxVal {
		vars[k] = v
	}
	vars["output"] = raw
	out, err := rs.e.cfg.Expr.EvalTemplate(ctx, tpl, vars)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("output: %w", err))
	}
	return out, nil
}

// render evaluates a template against the run's context; errors are
// permanent (an expression fails the same way every time).
func (rs *runState) render(ctx context.Context, what string, v any) (any, error) {
	tpl, err := rs.e.cfg.Expr.ParseTemplate(v)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	out, err := rs.e.cfg.Expr.EvalTemplate(ctx, tpl, rs.ctxVal)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	return out, nil
}
