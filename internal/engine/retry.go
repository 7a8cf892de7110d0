package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/workflow"
)

// Step retry defaults (a step with no retry_policy and no
// defaults.retry_policy).
const (
	StepMaxTriesDefault        = 3
	StepInitialIntervalDefault = time.Second
	StepBackoffDefault         = 2.0
	StepMaxIntervalDefault     = time.Minute
)

// retryPolicy is a resolved workflow.RetryPolicy.
type retryPolicy struct {
	maxTries     int
	initial, max time.Duration
	backoff      float64
	jitter       string // workflow.Jitter*; "" = ±20%
	retryOn      any    // expression over error; nil = the transient set
}

func resolveRetry(s *workflow.Step, d *workflow.Definition) retryPolicy {
	p := retryPolicy{maxTries: StepMaxTriesDefault, initial: StepInitialIntervalDefault, max: StepMaxIntervalDefault, backoff: StepBackoffDefault}
	apply := func(rp *workflow.RetryPolicy) {
		if rp == nil {
			return
		}
		if rp.MaxAttempts > 0 {
			p.maxTries = rp.MaxAttempts
		}
		if rp.InitialInterval > 0 {
			p.initial = time.Duration(rp.InitialInterval)
		}
		if rp.MaxInterval > 0 {
			p.max = time.Duration(rp.MaxInterval)
		}
		if rp.Backoff > 0 {
			p.backoff = rp.Backoff
		}
		if rp.Jitter != "" {
			p.jitter = rp.Jitter
		}
		if rp.RetryOn != nil {
			p.retryOn = rp.RetryOn
		}
	}
	if d.Defaults != nil {
		apply(d.Defaults.RetryPolicy)
	}
	apply(s.RetryPolicy)
	return p
}

// delay is the wait before try n+1 after try n failed (n ≥ 1).
func (p retryPolicy) delay(n int) time.Duration {
	return backoff.Jittered(p.jitter, p.initial, p.max, p.backoff, n)
}

// shouldRetry decides whether try n of step s, which failed with err,
// is retried: tries remain, the failure is not final (a handler's
// step.Permanent, an expression error, a fail step: isFinal), and
// retry_on (default: the failure is transient) holds.
// A retry_on that does not evaluate to a boolean is the step's failure
// (type expression), returned as the error.
func (rs *runState) shouldRetry(ctx context.Context, f *frame, s *workflow.Step, p retryPolicy, err error, n int) (bool, error) {
	if n >= p.maxTries || isFinal(err) {
		return false, nil
	}
	info, retryable := classify(err)
	if p.retryOn == nil {
		return retryable, nil
	}
	info.StepID, info.ScopePath = s.ID, &f.scope
	ok, eerr := rs.evalErrorExpr(ctx, f, "retry_policy.retry_on", p.retryOn, rs.scrubInfo(&info), s.Kind())
	if eerr != nil {
		return false, fmt.Errorf("%w (deciding whether to retry: %s)", eerr, rs.led.red.Error(err))
	}
	return ok, nil
}
