// Package backoff computes retry delays: exponential growth, a cap, and
// ±20% uniform jitter so that retries of many runs do not arrive together.
//
// Import rule: standard library only.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// JitterFraction spreads each delay uniformly over ±20%.
const JitterFraction = 0.2

// Exponential returns min(initial × factor^(n-1), max) with jitter, for
// the n-th retry (n ≥ 1).
func Exponential(initial, max time.Duration, factor float64, n int) time.Duration {
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(max)
	}
	d *= 1 + JitterFraction*(2*rand.Float64()-1)
	return time.Duration(d)
}
