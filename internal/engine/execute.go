package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Outcome is how Execute left a run.
type Outcome string

// Outcomes of Execute.
const (
	OutcomeSucceeded Outcome = "succeeded" // run ended succeeded
	OutcomeFailed    Outcome = "failed"    // run ended failed (or was re-queued for a new attempt)
	OutcomeReleased  Outcome = "released"  // lease released on shutdown; another runner continues
	OutcomeCancelled Outcome = "cancelled" // an operator cancelled the run; it stopped at a step boundary
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomePaused: the run reached a durable wait (wait, workflow_call)
	// and was parked (ParkRun): no lease is held; a wake re-queues it.
	OutcomePaused Outcome = "paused"
)

// MinSecretLength is the shortest secret value accepted (bytes). Secrets
// are scrubbed by value: a one-letter secret would be replaced inside every
// stored word, corrupting keys and values, so shorter values fail the run.
const MinSecretLength = 4

// runState is the in-memory context of one run being executed.
type runState struct {
	e   *Engine
	run *starflowtype.Run
	def *workflow.Definition
	led *ledger
	log *slog.Logger
	// root is the run's context: ledger writes use it, while nested
	// instances may run under a context of their own that a fail_fast
	// sibling lane or an enclosing timeout cancels.
	root context.Context
	top  *frame // the root frame: input, variables, steps, env, secrets, run
	// restored holds the checkpoints restored instead of executed, by
	// scope path + "\x00" + step id. Read-only once loaded.
	restored map[string]*starflowtype.Checkpoint
	// found holds the step rows of the current attempt that earlier
	// executions left unfinished, by scope path + "\x00" + step id
	// (tries.go). Read-only once loaded.
	found map[string]*starflowtype.Step
	// failed holds, by the same key, the failures of found's failed rows
	// as their node_error events recorded them (tries.go): an instance
	// found there is not run again, its failure is replayed. Read-only
	// once loaded.
	failed map[string]*failure
	mu     sync.Mutex // guards phase and waiting
	phase  string
	// waiting lists the step instances that entered a durable wait in
	// this execution and have not been closed (see closeWaiting).
	waiting []waitingStep
}

// Execute runs a claimed run whose OnRunStart has been written, under
// lease, until it ends, is re-queued for a new attempt, or its context is
// cancelled. It returns the outcome; the error is non-nil only when the
// outcome could not be recorded (a store failure, a lost lease).
//
// ctx's cancellation cause decides what a cancellation means: ErrShutdown
// releases the lease so another runner continues at once; anything else
// (a lost lease) stops writing at once.
func (e *Engine) Execute(ctx context.Context, run *starflowtype.Run, lease starflowtype.Lease) (outcome Outcome, rerr error) {
	ctx, span := e.traceRun(ctx, run, lease)
	defer func() { span.end(outcome, rerr) }()
	log := e.cfg.Logger.With("run_id", run.ID, "workflow", run.WorkflowName, "attempt", run.Attempt)
	led := &ledger{store: e.cfg.Store, runID: run.ID, attempt: run.Attempt, lease: lease, obs: e.cfg.Metrics.executing(run)}
	// phase starts as stored: a phase change that did not reach the store
	// (a stop between a step's completion and its phase event) is
	// recorded after the next step.
	rs := &runState{e: e, run: run, led: led, log: log, phase: run.Phase}
	log.Info("run started", "revision", shortRevision(run.WorkflowRevision), "lease_epoch", lease.Epoch)

	out, err := rs.execute(ctx)
	span.result(rs, err)
	if err == nil {
		r, werr := led.runComplete(ctx, out)
		if werr != nil {
			return rs.writeFailed(ctx, werr)
		}
		log.Info("run succeeded", "duration_ms", r.DurationMS)
		return OutcomeSucceeded, nil
	}
	if errors.Is(err, errParked) {
		// Parked, even when the runner is stopping meanwhile: ParkRun is
		// the release (and is refused, like any write, if the lease was lost).
		return rs.park(ctx)
	}
	if errors.Is(err, starflowtype.ErrCancelRequested) && ctx.Err() == nil {
		if _, werr := led.runCancelled(ctx); werr != nil {
			return rs.writeFailed(ctx, werr)
		}
		log.Info("run cancelled by an operator")
		return OutcomeCancelled, nil
	}
	if ctx.Err() != nil || errors.Is(err, starflowtype.ErrLeaseLost) || errors.Is(err, ErrShutdown) {
		return rs.writeFailed(ctx, err)
	}
	info, retry := rs.runRetry(ctx, err)
	if !retry && rs.def != nil {
		// Steps that parked at a durable wait while another failed the run
		// do not stay waiting in the ledger of a run that ended. (A run
		// retried keeps them: the store hands a wait woken meanwhile back
		// to the inbox for the next attempt's wait.)
		if werr := rs.closeWaiting("", rs.def.Steps, errors.New("abandoned: the run failed while this step waited")); werr != nil {
			return rs.writeFailed(ctx, werr)
		}
	}
	delay := backoff.Exponential(e.cfg.RunRetryMin, e.cfg.RunRetryMax, 2, run.Attempt)
	r, werr := led.runError(ctx, err, info, retry, delay)
	if werr != nil {
		return rs.writeFailed(ctx, werr)
	}
	attrs := []any{"error", led.red.Error(err), "status", r.Status, "retry", retry}
	var sf *stepFailed
	if errors.As(err, &sf) {
		attrs = append(attrs, "step", sf.stepID, "scope_path", sf.scope)
	}
	if retry {
		attrs = append(attrs, "retry_in", delay)
	}
	log.Info("run attempt failed", attrs...)
	return OutcomeFailed, nil
}

// runRetry returns the typed error of a failed attempt and whether the
// run is retried (a new attempt): the definition's retry_on when it sets
// one and the failure is a step's, else whether the failure is transient
// (network, timeout, http 5xx and 429, a custom step's retryable error,
// an error of the engine's own that is not permanent). A final failure
// (isFinal: a handler's step.Permanent, an expression error, a fail step)
// is never retried. A retry_on that does not evaluate fails the run
// without retry, the reason logged (the run's error stays the step's).
func (rs *runState) runRetry(ctx context.Context, err error) (*starflowtype.ErrorInfo, bool) {
	info, retry, fin := rs.runErrorInfo(err)
	var sf *stepFailed
	if fin || rs.def == nil || rs.def.RetryOn == nil || rs.top == nil || !errors.As(err, &sf) {
		return info, retry && !fin
	}
	ok, eerr := rs.evalErrorExpr(ctx, rs.top, "retry_on", rs.def.RetryOn, info, sf.innerKind)
	if eerr != nil {
		rs.log.Warn("the definition's retry_on did not evaluate; the run is not retried", "error", rs.led.red.Error(eerr))
		return info, false
	}
	return info, ok
}

// park is commit boundary 3 of a durable wait (ParkRun): the lease is
// released and the run parked, or queued at once when one of its waits is
// already woken — or, when an operator's cancel came while it entered its
// wait, ended cancelled (an end, counted as OnRunCancelled's is). It is
// written even when the runner is stopping.
func (rs *runState) park(ctx context.Context) (Outcome, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	r, err := rs.led.obs.run(rs.e.cfg.Store.ParkRun(pctx, &state.ParkRunParams{RunID: rs.run.ID, Lease: rs.led.lease}))
	if err != nil {
		return rs.writeFailed(ctx, fmt.Errorf("park: %w", err))
	}
	if r.Status == starflowtype.RunCancelled {
		rs.log.Info("run cancelled by an operator while it entered a durable wait")
		return OutcomeCancelled, nil
	}
	if r.ClaimState == starflowtype.ClaimQueued && rs.e.cfg.OnEnqueue != nil {
		rs.e.cfg.OnEnqueue()
	}
	rs.log.Info("run paused at a durable wait; lease released", "claim_state", r.ClaimState)
	return OutcomePaused, nil
}

// writeFailed decides what to do when execution stopped without a result
// that could be recorded: a lost lease writes nothing more; a shutdown
// releases the lease.
func (rs *runState) writeFailed(ctx context.Context, err error) (Outcome, error) {
	if errors.Is(err, starflowtype.ErrLeaseLost) || errors.Is(context.Cause(ctx), starflowtype.ErrLeaseLost) {
		rs.log.Warn("lease lost; abandoning run", "error", err)
		return OutcomeLeaseLost, fmt.Errorf("run %s: %w", rs.run.ID, starflowtype.ErrLeaseLost)
	}
	if errors.Is(err, ErrShutdown) || errors.Is(context.Cause(ctx), ErrShutdown) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if rerr := rs.led.release(rctx); rerr != nil {
			return OutcomeReleased, fmt.Errorf("run %s: release lease: %w", rs.run.ID, rerr)
		}
		rs.log.Info("lease released on shutdown")
		return OutcomeReleased, nil
	}
	return OutcomeLeaseLost, fmt.Errorf("run %s: %w", rs.run.ID, err)
}

// execute prepares the context and runs the root steps list, returning the
// run's output.
func (rs *runState) execute(ctx context.Context) (any, error) {
	rs.root = ctx
	def, err := rs.e.definition(ctx, rs.run)
	if err != nil {
		return nil, err
	}
	rs.def = def
	secrets := map[string]any{}
	var values []string
	for _, name := range def.Secrets {
		v, err := rs.e.cfg.Secrets(ctx, name)
		if err != nil {
			return nil, step.Permanent(err)
		}
		if len(v) < MinSecretLength {
			return nil, step.Permanent(fmt.Errorf("secret %s is %d bytes long; secrets are scrubbed by value from everything stored, "+
				"which is only safe for values of at least %d bytes", name, len(v), MinSecretLength))
		}
		secrets[name] = v
		values = append(values, v)
	}
	rs.led.red = redact.New(values...)
	input := any(map[string]any{})
	if len(rs.run.Input) > 0 && string(rs.run.Input) != "null" {
		if input, err = jsonvalue.Decode(rs.run.Input); err != nil {
			return nil, step.Permanent(fmt.Errorf("run input is not JSON: %w", err))
		}
	}
	env := map[string]any{}
	for k, v := range rs.e.cfg.Env {
		env[k] = v
	}
	rs.top = newFrame(rs.e.cfg.Expr, map[string]any{
		"input":     input,
		"variables": map[string]any{},
		"steps":     map[string]any{},
		"env":       env,
		"secrets":   secrets,
		"run":       map[string]any{"id": rs.run.ID, "attempt": int64(rs.run.Attempt), "workflow": rs.run.WorkflowName},
	})
	// A run claimed for the first time has written nothing yet (every
	// step write is fenced by a claim's lease): nothing to restore, no
	// reads.
	rs.restored, rs.found = map[string]*starflowtype.Checkpoint{}, map[string]*starflowtype.Step{}
	if rs.run.ClaimAttempts > 1 {
		if err := rs.loadCheckpoints(ctx); err != nil {
			return nil, err
		}
		if err := rs.loadSteps(ctx); err != nil {
			return nil, err
		}
	}
	last, err := rs.execList(ctx, rs.top, def.Steps)
	if err != nil {
		return nil, err
	}
	if def.Output == nil {
		return last, nil
	}
	tpl, err := rs.e.cfg.Expr.ParseTemplate(def.Output)
	if err != nil {
		return nil, exprError(fmt.Errorf("workflow output: %w", err))
	}
	out, err := rs.e.cfg.Expr.EvalTemplate(ctx, tpl, rs.top.vals)
	if err != nil {
		return nil, exprError(fmt.Errorf("workflow output: %w", err))
	}
	return out, nil
}

// loadCheckpoints reads the checkpoints whose step instances are restored
// instead of executed: those committed in the current attempt (a run
// continued after a graceful release), and, in resume recovery mode, those
// of earlier attempts too (the newest per step instance), so a resumed run
// never executes a committed step again.
func (rs *runState) loadCheckpoints(ctx context.Context) error {
	p := &state.ListCheckpointsParams{RunID: rs.run.ID, Attempt: rs.run.Attempt}
	resume := rs.run.RecoveryMode == starflowtype.RecoveryResume
	if resume {
		p.Attempt = 0 // every attempt
	}
	cps, err := rs.e.cfg.Store.ListCheckpoints(ctx, p)
	if err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	rs.restored = map[string]*starflowtype.Checkpoint{}
	for _, c := range cps {
		if c.Attempt > rs.run.Attempt {
			continue
		}
		k := c.ScopePath + "\x00" + c.StepID
		if old, ok := rs.restored[k]; !ok || c.Attempt >= old.Attempt {
			rs.restored[k] = c
		}
	}
	return nil
}
