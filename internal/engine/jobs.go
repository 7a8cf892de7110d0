package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Job steps (issue 15). A `job` step is a durable wait of kind job whose
// registration also writes the worker_jobs row (state.Jobs): the run
// parks, holding no runner, until a remote worker completes the job or it
// finally fails (its wait woken with state.JobPayload), or its timeout
// passes (the wait times out, the job is cancelled). Tries are counted by
// the store: a worker's retryable failure and an expired lease queue the
// job again while the step's retry_policy allows, so the engine sees one
// outcome per job and never retries it itself.

// jobCorrelation is the correlation key of a job step instance's wait: the
// instance, so that a completed job whose run was interrupted before it
// resumed goes back to the inbox for the same instance of the next attempt.
func jobCorrelation(scope, stepID string) string { return scope + "#" + stepID }

// JobIdempotencyKey is a job's idempotency_key: the step instance of the
// run, the same for every try and every attempt of the run.
func JobIdempotencyKey(runID, scope, stepID string) string {
	return runID + "/" + scope + "/" + stepID
}

// planJob renders job step s: its input, its retry policy (retry_on is
// evaluated now for an expired lease, a timeout error, with the step's
// context), the job's limits.
func (rs *runState) planJob(ctx context.Context, f *frame, s *workflow.Step) (*waitPlan, error) {
	j := s.Job
	var in any = map[string]any{}
	if j.Input != nil {
		var err error
		if in, err = rs.render(ctx, f, "job.input", j.Input); err != nil {
			return nil, err
		}
	}
	hb := time.Duration(j.HeartbeatTimeout)
	if hb <= 0 {
		hb = time.Duration(workflow.JobHeartbeatTimeoutDefault)
	}
	p := resolveRetry(s, rs.def)
	retry := state.JobRetry{InitialMS: p.initial.Milliseconds(), MaxMS: p.max.Milliseconds(), Backoff: p.backoff,
		Jitter: p.jitter, RetryOn: p.retryOn, RetryExpired: true}
	if p.retryOn != nil {
		expired := &starflowtype.ErrorInfo{Type: starflowtype.ErrorTimeout, Message: "the worker sent no heartbeat within the heartbeat timeout",
			StepID: s.ID, ScopePath: &f.scope}
		ok, err := rs.evalErrorExpr(ctx, f, "retry_policy.retry_on", p.retryOn, expired, s.Kind())
		if err != nil {
			return nil, err
		}
		retry.RetryExpired = ok
	}
	return &waitPlan{kind: starflowtype.WaitJob, signal: starflowtype.JobSignal + ":" + j.Type, correlationKey: jobCorrelation(f.scope, s.ID),
		timeout: time.Duration(j.Timeout), jobInput: in, job: &state.JobSpec{Type: j.Type, MaxTries: p.maxTries,
			HeartbeatTimeout: hb, Retry: retry, IdempotencyKey: JobIdempotencyKey(rs.run.ID, f.scope, s.ID)}}, nil
}

// jobResult is the outcome of job step s from its woken (or timed-out)
// wait w: the worker's output, or the step's failure — the worker's typed
// error, or a timeout. The job's tries were spent: the engine does not try
// the step again (a job step has no tries of its own), but the run's
// attempts apply as to any failure (a timeout is transient, a worker's
// error is not unless the definition's retry_on says so).
func jobResult(s *workflow.Step, w *starflowtype.Wait, payload any) (any, error) {
	if w.Status == starflowtype.WaitTimedOut {
		err := fmt.Errorf("job %s (type %s) did not finish within its timeout of %s", w.ID, s.Job.Type, time.Duration(s.Job.Timeout))
		return nil, &typedError{info: starflowtype.ErrorInfo{Type: starflowtype.ErrorTimeout}, retryable: true, err: step.Permanent(err)}
	}
	m, _ := payload.(map[string]any)
	if e, ok := m["error"].(map[string]any); ok {
		info := mapInfo(e)
		if info == nil {
			info = &starflowtype.ErrorInfo{Type: starflowtype.ErrorUntyped}
		}
		msg := info.Message
		if msg == "" {
			msg = "no message"
		}
		info.StepID, info.ScopePath = "", nil // set where the failure is recorded
		err := fmt.Errorf("job %s (type %s) failed: %s", w.ID, s.Job.Type, msg)
		// A lost lease is transient for the run's attempts (a new attempt
		// queues a new job); a worker's own failure is not, unless the
		// definition's retry_on says so.
		return nil, &typedError{info: *info, retryable: info.Type == starflowtype.ErrorTimeout, err: step.Permanent(err)}
	}
	if _, ok := m["output"]; !ok {
		return nil, typed(starflowtype.ErrorUntyped, errors.New("job wake payload has neither output nor error"))
	}
	return m["output"], nil
}

// JobRetryOn evaluates a job step's retry_on (state.JobRetry.RetryOn) over
// a worker's error: the server's decision, when a worker fails a job as
// retryable, whether the failure may be tried again. The expression sees
// `error` only (the run's context is not at hand outside the run): one
// that reads anything else cannot be evaluated, and the failure is then
// not tried again (the returned error says why).
func (e *Engine) JobRetryOn(ctx context.Context, retryOn any, info *starflowtype.ErrorInfo) (bool, error) {
	if retryOn == nil {
		return true, nil
	}
	env := e.cfg.Expr
	tpl, err := env.ParseExpr(retryOn)
	if err != nil {
		return false, fmt.Errorf("retry_policy.retry_on: %w", err)
	}
	x, err := env.EvalTemplate(ctx, tpl, map[string]any{"error": errorRecord(info, "job")})
	if err != nil {
		return false, fmt.Errorf("retry_policy.retry_on (a job's is evaluated over error alone): %w", err)
	}
	b, ok := x.(bool)
	if !ok {
		return false, fmt.Errorf("retry_policy.retry_on must be a boolean, got %s", jsonType(x))
	}
	return b, nil
}
