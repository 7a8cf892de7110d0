// Package backoff computes retry delays: exponential growth, a cap, and
// ±20% uniform jitter so that retries of many runs do not arrive together.
// The cap is the longest wait: jitter is applied within it, never on top.
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

// Exponential returns the wait before the n-th retry (n ≥ 1): the base
// d = min(initial × factor^(n-1), max), spread uniformly over
// [d × (1 − JitterFraction), min(d × (1 + JitterFraction), max)]. The
// result never exceeds max (a capped delay is drawn from
// [0.8 × max, max], so retries at the cap still spread out) and is never
// negative. A max ≤ 0 yields 0.
func Exponential(initial, max time.Duration, factor float64, n int) time.Duration {
	if max <= 0 {
		return 0
	}
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(max)
	}
	d = math.Max(d, 0)
	lo, hi := d*(1-JitterFraction), math.Min(d*(1+JitterFraction), float64(max))
	out := time.Duration(lo + (hi-lo)*rand.Float64())
	return min(out, max) // float rounding must not cross the cap
}
