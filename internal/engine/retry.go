package engine

import (
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
}

func resolveRetry(s *workflow.Step, d *workflow.Definition) retryPolicy {
	p := retryPolicy{StepMaxTriesDefault, StepInitialIntervalDefault, StepMaxIntervalDefault, StepBackoffDefault}
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
	}
	if d.Defaults != nil {
		apply(d.Defaults.RetryPolicy)
	}
	apply(s.RetryPolicy)
	return p
}

// delay is the wait before try n+1 after try n failed (n ≥ 1).
func (p retryPolicy) delay(n int) time.Duration {
	return backoff.Exponential(p.initial, p.max, p.backoff, n)
}
