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

// stepFailed is a step's terminal failure, as it propagates to the
// enclosing construct and the run. A construct that fails because a step
// inside it failed wraps that step's stepFailed in its own, so the
// innermost one names the step that failed first (what `error` shows to a
// catch). Permanence (step.Permanent) is preserved: errors.As sees through
// the wrapping.
type stepFailed struct {
	stepID, kind, scope string
	err                 error
	// info is the typed error of the step that failed first (this one,
	// or the innermost step inside it), scrubbed; innerKind is that
	// step's kind, retryable whether its failure is transient by default.
	info      *starflowtype.ErrorInfo
	innerKind string
	retryable bool
	final     bool // no retry_on retries it (isFinal)
}

func (f *stepFailed) Error() string { return fmt.Sprintf("step %s: %v", f.stepID, f.err) }
func (f *stepFailed) Unwrap() error { return f.err }

// stopping reports whether err means the run stops here rather than a step
// failing: the lease was lost, the runner shuts down (a cancelled context
// or a graceful drain at a step boundary), or an operator cancelled the
// run. Nothing more is written to the ledger for it (the instance rows
// left running are continued or swept), no catch runs, and nothing is
// recorded skipped.
//
// A step that entered a durable wait (errParked) stops its list the same
// way, though the run is parked, not stopped: see realStop.
func (rs *runState) stopping(err error) bool {
	return rs.root.Err() != nil || errors.Is(err, starflowtype.ErrLeaseLost) ||
		errors.Is(err, starflowtype.ErrCancelRequested) || errors.Is(err, ErrShutdown) ||
		errors.Is(err, errParked)
}

// execList runs one steps list in frame f and returns the output of its
// last step in list order. A list whose steps name their dependencies with
// run_after is a graph and runs concurrently (execDAG, dag.go); a plain
// list runs in sequence, each step after the one before it.
func (rs *runState) execList(ctx context.Context, f *frame, list []*workflow.Step) (any, error) {
	for _, s := range list {
		if _, ok := f.steps[s.ID]; !ok {
			f.steps[s.ID] = map[string]any{"status": "pending"}
		}
	}
	if hasGraph(list) {
		return rs.execDAG(ctx, f, list)
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
			return nil, rs.cycleError(f)
		}
		if ctx.Err() != nil {
			// Cancelled while the run goes on (a fail_fast sibling lane
			// failed, an enclosing construct timed out): what has not
			// started is skipped.
			err := context.Cause(ctx)
			if !rs.stopping(err) {
				if serr := rs.skipRemaining(f, list, started, err.Error()); serr != nil {
					return nil, serr
				}
			}
			return nil, err
		}
		started[next] = true
		s := list[next]
		out, err := rs.traceStep(ctx, f, s)
		if err != nil {
			if !rs.stopping(err) {
				if serr := rs.skipRemaining(f, list, started, "step "+s.ID+" failed"); serr != nil {
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

// cycleError: steps remain that can never start (validation rejects
// run_after cycles, so only a definition built in Go gets here).
func (rs *runState) cycleError(f *frame) error {
	return step.Permanent(fmt.Errorf("run_after cycle among the steps that have not run in scope %q", f.scope))
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
// skipped, because a failure (or a cancellation) ended the list.
//
// A step that an earlier execution of the attempt started and left open
// (parked at a wait, a job) did start: it is cut off instead — recorded
// cancelled, its job cancelled (giveUp) — as the lanes losing a race are.
// Skipping it left its job claimable by a worker (TestJobRaceLoserIsCancelled,
// when the lost lane was cancelled before it re-entered its wait).
func (rs *runState) skipRemaining(f *frame, list []*workflow.Step, started []bool, reason string) error {
	for i, s := range list {
		if started[i] {
			continue
		}
		if try := rs.openTry(f.scope, s.ID); try > 0 && !rs.led.wrote(f.scope, s.ID) {
			f.steps[s.ID] = map[string]any{"status": string(starflowtype.StepCancelled), "error": rs.led.red.String(reason)}
			if err := rs.giveUp(f.scope, s.ID, s.Kind(), try, errors.New(reason), true); err != nil {
				return err
			}
			continue
		}
		f.steps[s.ID] = map[string]any{"status": string(starflowtype.StepSkipped)}
		if err := rs.led.nodeSkipped(rs.root, f.scope, s.ID, s.Kind(), reason); err != nil {
			return err
		}
	}
	return nil
}

// execStep runs (or restores) one step instance in frame f and returns its
// stored output. Ledger writes use the run's context (rs.root), not ctx:
// ctx may be cancelled for this instance alone (a fail_fast sibling lane
// failed, an enclosing construct timed out), and that failure is recorded.
func (rs *runState) execStep(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if draining(ctx) {
		return nil, ErrShutdown // stop at this step boundary; the lease is released
	}
	scope, kind := f.scope, s.Kind()
	if cp, ok := rs.restored[scope+"\x00"+s.ID]; ok {
		return rs.restore(f, s, cp)
	}
	if rec := rs.replayable(scope, s.ID); rec != nil && !s.IsConstruct() {
		return nil, rs.replay(f, s, rec)
	}
	rs.led.obs.begin(scope, s.ID, kind) // its duration runs from here (metrics.go)
	if s.When != nil {
		ok, err := rs.evalBool(ctx, f, "when", s.When)
		if err != nil {
			if rs.stopping(err) {
				return nil, err // cut off by the run stopping, not the step's failure
			}
			return nil, rs.fail(f, s, 0, err)
		}
		if !ok {
			f.steps[s.ID] = map[string]any{"status": string(starflowtype.StepSkipped)}
			return nil, rs.led.nodeSkipped(rs.root, scope, s.ID, kind, "when is false")
		}
	}
	if s.IsConstruct() {
		return rs.execConstruct(ctx, f, s)
	}
	if s.Wait != nil || s.WorkflowCall != nil || s.Job != nil {
		return rs.execWait(ctx, f, s) // no tries, no step timeout: the wait has its own (a job's tries are the store's)
	}
	policy := resolveRetry(s, rs.def)
	timeout := rs.e.cfg.StepTimeout
	if rs.def.Defaults != nil && rs.def.Defaults.Timeout > 0 {
		timeout = time.Duration(rs.def.Defaults.Timeout)
	}
	if s.Timeout > 0 {
		timeout = time.Duration(s.Timeout)
	}
	// Tries continue the attempt's count (tries.go); the retry budget
	// counts the tries of this execution (n).
	prior := rs.priorTries(scope, s.ID)
	for n := 1; ; n++ {
		try := prior + n
		// A pure step's start is written with its completion (one write);
		// any other step's before it runs, so no side effect starts
		// unrecorded. A pure try that fails writes its start then.
		started := !s.Pure()
		if started {
			if err := rs.led.nodeStart(rs.root, scope, s.ID, kind, try); err != nil {
				return nil, err
			}
		}
		tctx, cancel := context.WithTimeoutCause(ctx, timeout, stepTimeout("step timed out after %s", timeout))
		raw, delta, err := rs.runKind(tctx, f, s, try)
		if err == nil {
			var out any
			out, err = rs.shapeOutput(tctx, f, s, raw)
			if err == nil {
				cancel()
				// The handler's work is done: record it even if the runner is
				// stopping (a shutdown must not throw a finished step away).
				// The fence still refuses the write if the lease was lost.
				wctx, wcancel := context.WithTimeout(context.WithoutCancel(rs.root), releaseTimeout)
				err = rs.complete(wctx, f, s, try, !started, out, delta)
				wcancel()
				var bad unencodable
				if !errors.As(err, &bad) {
					return out, err
				}
				// The output cannot be stored: a permanent failure of the step.
				if err := rs.startLate(started, scope, s, try); err != nil {
					return nil, err
				}
				return nil, rs.fail(f, s, try, err)
			}
		}
		if ctx.Err() == nil {
			if err := rs.startLate(started, scope, s, try); err != nil {
				cancel()
				return nil, err
			}
		}
		if tctx.Err() != nil && ctx.Err() == nil {
			err = context.Cause(tctx) // the step's own timeout: transient
		}
		cancel()
		if ctx.Err() != nil {
			cause := context.Cause(ctx)
			if rs.stopping(cause) {
				return nil, cause // lease lost or shutdown: not the step's failure
			}
			// Cancelled while the run goes on: the step fails with the
			// cause, without retrying.
			return nil, rs.fail(f, s, try, cause)
		}
		retry, rerr := rs.shouldRetry(ctx, f, s, policy, err, n)
		if rerr != nil {
			return nil, rs.fail(f, s, try, rerr)
		}
		if retry {
			d := policy.delay(n)
			if werr := rs.led.nodeRetry(rs.root, scope, s.ID, try, err, d); werr != nil {
				return nil, werr
			}
			rs.traceRetry(ctx, try, d.Milliseconds(), err)
			rs.log.Info("step try failed; retrying", "step", s.ID, "scope_path", scope, "try", try, "backoff", d, "error", rs.led.red.Error(err))
			if serr := rs.e.cfg.Sleep(ctx, d); serr != nil {
				if rs.stopping(serr) {
					return nil, serr
				}
				return nil, rs.fail(f, s, try, serr)
			}
			continue
		}
		return nil, rs.fail(f, s, try, err)
	}
}

// fail records a step instance's terminal failure and returns it as a
// stepFailed (or the ledger's error when that cannot be written).
//
// A step cancelled because its race was lost (raceLost) is recorded
// cancelled, not failed.
//
// A construct whose failure an earlier execution of the attempt recorded
// (its inner failure replayed, see replay) is not recorded again.
func (rs *runState) fail(f *frame, s *workflow.Step, try int, err error) error {
	var lost *raceLost
	cancelled := errors.As(err, &lost)
	info, kind, retryable, fin := rs.stepError(s.ID, s.Kind(), f.scope, err)
	if rs.replayable(f.scope, s.ID) == nil {
		rec := &failure{info: info, kind: kind, retryable: retryable, final: fin}
		if werr := rs.led.nodeError(rs.root, f.scope, s.ID, s.Kind(), try, err, cancelled, rec); werr != nil {
			return werr
		}
	}
	status := starflowtype.StepFailed
	if cancelled {
		status = starflowtype.StepCancelled
	}
	f.steps[s.ID] = map[string]any{"status": string(status), "error": rs.led.red.Error(err)}
	return &stepFailed{stepID: s.ID, kind: s.Kind(), scope: f.scope, err: err, info: info, innerKind: kind, retryable: retryable, final: fin}
}

// startLate writes the start of a pure step's try that did not succeed
// (its node_start, before the retry or the failure is recorded).
func (rs *runState) startLate(started bool, scope string, s *workflow.Step, try int) error {
	if started {
		return nil
	}
	return rs.led.nodeStart(rs.root, scope, s.ID, s.Kind(), try)
}

// complete applies a succeeded step's output and context changes and
// commits them (ledger row, event and checkpoint in one transaction; with
// withStart, the try's start too).
func (rs *runState) complete(ctx context.Context, f *frame, s *workflow.Step, try int, withStart bool, out any, delta map[string]any) error {
	if err := rs.led.nodeComplete(ctx, f.scope, s.ID, s.Kind(), try, withStart, out, delta); err != nil {
		return err
	}
	f.set(delta)
	f.succeeded(s.ID, out)
	return rs.recordPhase(ctx, f)
}

// restore applies a checkpoint instead of executing the step: its output
// and the context changes it made (for a construct: of every step inside
// it) are applied to f.
func (rs *runState) restore(f *frame, s *workflow.Step, cp *starflowtype.Checkpoint) (any, error) {
	out, err := jsonvalue.Decode(cp.Output)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of step %s in scope %q: output: %w", s.ID, f.scope, err)
	}
	var delta map[string]any
	if len(cp.Context) > 0 {
		d, err := jsonvalue.Decode(cp.Context)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of step %s in scope %q: context: %w", s.ID, f.scope, err)
		}
		delta, _ = d.(map[string]any)
	}
	f.set(delta)
	f.succeeded(s.ID, out)
	return out, nil
}

// recordPhase writes a phase event when variables.phase (as frame f
// sees it) changed.
func (rs *runState) recordPhase(ctx context.Context, f *frame) error {
	p, ok := f.vars["phase"].(string)
	rs.mu.Lock()
	if !ok || p == rs.phase {
		rs.mu.Unlock()
		return nil
	}
	rs.phase = p
	rs.mu.Unlock()
	return rs.led.phase(ctx, p)
}

// evalBool evaluates an expression-by-nature (when, if.condition,
// repeat_until.until) in frame f; it must yield a boolean.
func (rs *runState) evalBool(ctx context.Context, f *frame, what string, v any) (bool, error) {
	tpl, err := f.env.ParseExpr(v)
	if err != nil {
		return false, exprError(fmt.Errorf("%s: %w", what, err))
	}
	x, err := f.env.EvalTemplate(ctx, tpl, f.vals)
	if err != nil {
		return false, exprError(fmt.Errorf("%s: %w", what, err))
	}
	b, ok := x.(bool)
	if !ok {
		return false, exprError(fmt.Errorf("%s must be a boolean, got %s", what, jsonType(x)))
	}
	return b, nil
}

// shapeOutput applies the step's `output` expression to its raw output.
func (rs *runState) shapeOutput(ctx context.Context, f *frame, s *workflow.Step, raw any) (any, error) {
	if s.Output == nil {
		return raw, nil
	}
	tpl, err := f.env.ParseTemplate(s.Output)
	if err != nil {
		return nil, exprError(fmt.Errorf("output: %w", err))
	}
	vars := make(map[string]any, len(f.vals)+1)
	for k, v := range f.vals {
		vars[k] = v
	}
	vars["output"] = raw
	out, err := f.env.EvalTemplate(ctx, tpl, vars)
	if err != nil {
		return nil, exprError(fmt.Errorf("output: %w", err))
	}
	return out, nil
}

// render evaluates a template in frame f; errors are permanent (an
// expression fails the same way every time).
func (rs *runState) render(ctx context.Context, f *frame, what string, v any) (any, error) {
	tpl, err := f.env.ParseTemplate(v)
	if err != nil {
		return nil, exprError(fmt.Errorf("%s: %w", what, err))
	}
	out, err := f.env.EvalTemplate(ctx, tpl, f.vals)
	if err != nil {
		return nil, exprError(fmt.Errorf("%s: %w", what, err))
	}
	return out, nil
}
