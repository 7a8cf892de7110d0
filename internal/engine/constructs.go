package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// The control-flow constructs (SPEC §2, §3 "Control-flow rules").
//
// A construct is a step instance like any other: it gets a ledger row
// (one node_start, then node_complete or node_error: re-entering it after
// a wake or a continuation writes no second node_start, tries.go) and, when it
// succeeds, a checkpoint whose output is the construct's output and whose
// context is the merged delta of every step inside it. A completed
// construct is therefore restored in one piece on resume, while one cut
// off midway is re-entered: each step instance inside it that has a
// checkpoint is restored into its frame (see frames.go) instead of
// executed, and the rest run.
//
// A construct has no retries of its own (the steps inside it have theirs)
// and no default timeout: only its own `timeout` bounds it (the default
// step timeout bounds one try of a leaf step, which a loop of many steps
// would exceed).
//
// A failure inside a construct propagates to the enclosing try, or the
// run: the construct is recorded failed, and the context changes of the
// steps that succeeded inside it stay applied (a failure never undoes
// them, SPEC §2), so an enclosing catch sees them.

// execConstruct runs a construct step in frame f (its `when` has been
// evaluated, and it has no checkpoint).
func (rs *runState) execConstruct(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	try, err := rs.enter(f.scope, s.ID, s.Kind())
	if err != nil {
		return nil, err
	}
	cctx := ctx
	if s.Timeout > 0 {
		d := time.Duration(s.Timeout)
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeoutCause(ctx, d, stepTimeout("step %s timed out after %s", s.ID, d))
		defer cancel()
	}
	body := f.child(f.scope)
	if s.Parallel != nil && s.Parallel.Races() {
		return rs.execRace(cctx, f, body, s, try)
	}
	out, err := rs.runConstruct(cctx, body, s)
	if err == nil {
		out, err = rs.shapeOutput(cctx, f, s, out)
	}
	if err == nil {
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(rs.root), releaseTimeout)
		err = rs.complete(wctx, f, s, try, false, out, body.delta)
		wcancel()
		var bad unencodable
		if !errors.As(err, &bad) {
			return out, err
		}
	}
	if rs.stopping(err) {
		return nil, err
	}
	f.set(body.delta) // no rollback: what succeeded inside stays applied
	return nil, rs.fail(f, s, try, err)
}

// runConstruct runs the construct's nested lists in its body frame and
// returns the construct's raw output.
func (rs *runState) runConstruct(ctx context.Context, body *frame, s *workflow.Step) (any, error) {
	switch {
	case s.If != nil:
		return rs.execIf(ctx, body, s.If)
	case s.Try != nil:
		return rs.execTry(ctx, body, s.Try)
	case s.RepeatUntil != nil:
		return rs.execRepeat(ctx, body, s)
	case s.ForEach != nil:
		return rs.execForEach(ctx, body, s)
	case s.Parallel != nil:
		return rs.execParallel(ctx, body, s)
	case s.Switch != nil:
		return rs.execSwitch(ctx, body, s.Switch)
	}
	return nil, step.Permanent(fmt.Errorf("the %s construct is not executed by this version of the engine", s.Kind()))
}

// execIf runs the branch the condition selects, in the construct's scope.
// The output is the branch's output, null when no branch runs.
func (rs *runState) execIf(ctx context.Context, f *frame, c *workflow.If) (any, error) {
	ok, err := rs.evalBool(ctx, f, "if.condition", c.Condition)
	if err != nil {
		return nil, err
	}
	switch {
	case ok:
		return rs.execList(ctx, f, c.Then)
	case c.Else != nil:
		return rs.execList(ctx, f, c.Else)
	}
	return nil, nil
}

// execTry runs steps, then catch when a step failed, then finally, all in
// the construct's scope and frame (catch and finally see the context
// changes of the steps that succeeded before the failure). catch sees the
// failure as `error` (the typed error of the step that failed first,
// innermost: errorRecord), and so does catch_when, which decides whether
// catch runs: when it is false the failure propagates unchanged, after
// finally; when it does not evaluate, the try fails with that expression
// error (after finally). The output is the output of steps, or of catch
// when it caught the failure.
//
// finally runs after steps and catch whether they succeeded or failed,
// but not when the run is stopping (shutdown, lost lease, operator cancel)
// or the try itself was cancelled (a fail_fast sibling lane failed, an
// enclosing timeout): then nothing more runs in it. A failure of finally
// fails the try when the try had succeeded; when it had already failed,
// that first failure propagates and finally's is in the ledger.
func (rs *runState) execTry(ctx context.Context, f *frame, t *workflow.Try) (any, error) {
	out, err := rs.execList(ctx, f, t.Steps)
	undecided := false // catch_when did not evaluate
	if err != nil && t.Catch != nil && rs.catchable(ctx, err) {
		var sf *stepFailed
		errors.As(err, &sf) // catchable: there is one
		catch := true
		if t.CatchWhen != nil {
			var cerr error
			if catch, cerr = rs.evalErrorExpr(ctx, f, "try.catch_when", t.CatchWhen, sf.info, sf.innerKind); cerr != nil {
				// The try fails with the expression's failure; the
				// failure it was deciding about is in its message.
				err = fmt.Errorf("%w (deciding whether to catch: %s)", cerr, rs.led.red.Error(sf.err))
				catch, undecided = false, true
			}
		}
		if catch {
			// Steps inside that parked at a wait while a sibling failed
			// are given up (decision 40).
			if werr := rs.closeWaiting(f.scope, t.Steps, errors.New("abandoned: the enclosing try caught a failure while this step waited")); werr != nil {
				return nil, werr
			}
			restore := f.bind("error", errorRecord(sf.info, sf.innerKind))
			out, err = rs.execList(ctx, f, t.Catch)
			restore()
		}
	}
	if t.Finally == nil || (err != nil && !undecided && !rs.catchable(ctx, err)) {
		return out, err
	}
	if _, ferr := rs.execList(ctx, f, t.Finally); ferr != nil && (err == nil || rs.stopping(ferr)) {
		return nil, ferr
	}
	return out, err
}

// execRepeat runs the loop's steps once per iteration, iteration i (from
// 0) in scope <id>.iter_<i> and a frame of its own that starts from the
// loop's context as the previous iterations left it (their changes are
// merged after each one). until is evaluated after each iteration, in
// that iteration's frame (its steps visible). The output is the last
// iteration's; reaching max_iterations with until still false fails the
// step with max_iterations_exceeded (permanent: it fails the same way
// every time).
func (rs *runState) execRepeat(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	r := s.RepeatUntil
	if r.MaxIterations < 1 {
		return nil, step.Permanent(fmt.Errorf("max_iterations must be at least 1, got %d", r.MaxIterations))
	}
	env, err := f.env.With(workflow.IterationName)
	if err != nil {
		return nil, step.Permanent(err)
	}
	// The iteration is not bound over an enclosing for_each's item named
	// "iteration" (a definition applied before the name existed).
	bindIteration := !slices.Contains(f.named, workflow.IterationName)
	for i := 0; i < r.MaxIterations; i++ {
		it := f.child(scopeOf(f.scope, s.ID, "iter", strconv.Itoa(i)))
		it.env = env
		if bindIteration {
			it.bind(workflow.IterationName, int64(i))
		}
		out, err := rs.traceList(ctx, it, r.Steps, "iteration", s)
		f.merge(it)
		if err != nil {
			return nil, err
		}
		done, err := rs.evalBool(ctx, it, "repeat_until.until", r.Until)
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
	return nil, typed(starflowtype.ErrorMaxIterationsExceeded, fmt.Errorf("max_iterations_exceeded: until was still false after %d iterations", r.MaxIterations))
}

// execSwitch runs the steps of the first case whose when is true, else
// default (when there is one), in the construct's scope. The output is the
// branch's output, null when no branch runs. The cases are tested again
// when the construct is re-entered (they are deterministic, SPEC §3).
func (rs *runState) execSwitch(ctx context.Context, f *frame, sw *workflow.Switch) (any, error) {
	for i, c := range sw.Cases {
		ok, err := rs.evalBool(ctx, f, fmt.Sprintf("switch.cases[%d].when", i), c.When)
		if err != nil {
			return nil, err
		}
		if ok {
			return rs.execList(ctx, f, c.Steps)
		}
	}
	if sw.Default != nil {
		return rs.execList(ctx, f, sw.Default)
	}
	return nil, nil
}

// catchable reports whether err is a step's failure that a try may catch:
// not the run stopping, not a store error, not a cancellation of ctx.
func (rs *runState) catchable(ctx context.Context, err error) bool {
	var sf *stepFailed
	return errors.As(err, &sf) && ctx.Err() == nil && !rs.stopping(err)
}
