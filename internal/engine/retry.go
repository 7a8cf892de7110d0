package engine

import (
	"math"
	"math/rand/v2"
	"time"

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

// jitterFraction spreads each delay uniformly over ±20%.
const jitterFraction = 0.2

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
	return backoff(p.initial, p.max, p.backoff, n)
}

// backoff returns min(initial × factor^(n-1), max) with ±20% jitter.
func backoff(initial, max time.Duration, factor float64, n int) time.Duration {
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(max)
	}
	d *= 1 + jitterFraction*(2*rand.Float64()-1)
	return time.Duration(d)
}
