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

// Jitter modes of Jittered (a step's retry_policy.jitter).
const (
	JitterFull  = "full"  // uniform over [0, d]
	JitterEqual = "equal" // d/2 plus uniform over [0, d/2]
	JitterNone  = "none"  // d exactly
)

// Jittered returns the wait before the n-th retry (n ≥ 1) with the base
// d = min(initial × factor^(n-1), max) spread by mode: JitterFull,
// JitterEqual, JitterNone, or "" for Exponential's ±20% within the cap.
// The result never exceeds max. Source: the "full" and "equal" jitter of
// Marc Brooker, "Exponential Backoff And Jitter" (AWS Architecture Blog,
// 2015).
func Jittered(mode string, initial, max time.Duration, factor float64, n int) time.Duration {
	switch mode {
	case JitterFull, JitterEqual, JitterNone:
	default:
		return Exponential(initial, max, factor, n)
	}
	if max <= 0 {
		return 0
	}
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(max)
	}
	d = math.Max(d, 0)
	var out float64
	switch mode {
	case JitterFull:
		out = d * rand.Float64()
	case JitterEqual:
		out = d/2 + d/2*rand.Float64()
	default:
		out = d
	}
	return min(time.Duration(out), max)
}
