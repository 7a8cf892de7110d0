package backoff_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/maintenance"
)

func TestExponential(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second} {
		for range 100 {
			d := backoff.Exponential(time.Second, time.Minute, 2, n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("n=%d: %s outside ±20%% of %s", n, d, want)
			}
		}
	}
}

// callers are the parameters every caller of Exponential uses by default:
// step retries (engine.Step*Default), run-level backoff (the engine's and
// the lease sweep's RunRetry bounds) and notify retries.
var callers = []struct {
	name         string
	initial, max time.Duration
	factor       float64
}{
	{"step retry", engine.StepInitialIntervalDefault, engine.StepMaxIntervalDefault, engine.StepBackoffDefault},
	{"run retry", engine.RunRetryMinDefault, engine.RunRetryMaxDefault, 2},
	{"sweep retry", maintenance.RetryMinDefault, maintenance.RetryMaxDefault, 2},
	{"notify retry", maintenance.NotifyRetryMinDefault, maintenance.NotifyRetryMaxDefault, 2},
	// A cap below the initial interval, and a cap one step above it.
	{"cap below initial", 10 * time.Second, 3 * time.Second, 2},
	{"cap near initial", time.Second, 1100 * time.Millisecond, 1.5},
}

// TestExponentialNeverExceedsCap is the property of issue 10 item 10: for
// every caller's parameters and every retry number, no sample exceeds the
// cap, none falls below 80% of the capped base, and samples at the cap
// still spread (not all equal to it).
func TestExponentialNeverExceedsCap(t *testing.T) {
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			for n := 1; n <= 40; n++ {
				base := time.Duration(min(float64(c.initial)*pow(c.factor, n-1), float64(c.max)))
				lo, hi := time.Duration(float64(base)*0.8), min(time.Duration(float64(base)*1.2), c.max)
				distinct := map[time.Duration]bool{}
				for range 2000 {
					d := backoff.Exponential(c.initial, c.max, c.factor, n)
					if d > c.max {
						t.Fatalf("n=%d: %s exceeds max_interval %s", n, d, c.max)
					}
					if d < lo-1 || d > hi {
						t.Fatalf("n=%d: %s outside [%s, %s]", n, d, lo, hi)
					}
					distinct[d] = true
				}
				if len(distinct) < 100 {
					t.Fatalf("n=%d: only %d distinct delays in 2000 samples: jitter collapsed", n, len(distinct))
				}
			}
		})
	}
}

// TestExponentialRandomParameters: the cap holds for arbitrary policies a
// definition may write (retry_policy initial_interval, backoff,
// max_interval), including huge exponents.
func TestExponentialRandomParameters(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		initial := time.Duration(r.Int64N(int64(time.Hour))) + 1
		maxI := time.Duration(r.Int64N(int64(24*time.Hour))) + 1
		factor := 1 + r.Float64()*9
		n := 1 + r.IntN(200)
		d := backoff.Exponential(initial, maxI, factor, n)
		if d > maxI || d < 0 {
			t.Fatalf("Exponential(%s, %s, %g, %d) = %s: outside [0, max]", initial, maxI, factor, n, d)
		}
	}
	if d := backoff.Exponential(time.Second, 0, 2, 1); d != 0 {
		t.Fatalf("a zero cap gave %s", d)
	}
}

func pow(f float64, n int) float64 {
	out := 1.0
	for range n {
		out *= f
		if out > 1e30 {
			return out
		}
	}
	return out
}

// TestJittered: each mode stays within its range and under the cap, and
// the random modes spread.
func TestJittered(t *testing.T) {
	const initial, maxI = time.Second, 10 * time.Second
	for _, c := range []struct {
		mode   string
		lo, hi float64 // fractions of the base
	}{
		{backoff.JitterFull, 0, 1},
		{backoff.JitterEqual, 0.5, 1},
		{backoff.JitterNone, 1, 1},
		{"", 0.8, 1.2},
	} {
		t.Run("mode="+c.mode, func(t *testing.T) {
			for n := 1; n <= 8; n++ {
				base := min(time.Duration(float64(initial)*pow(2, n-1)), maxI)
				distinct := map[time.Duration]bool{}
				for range 500 {
					d := backoff.Jittered(c.mode, initial, maxI, 2, n)
					if d > maxI {
						t.Fatalf("n=%d: %s exceeds the cap %s", n, d, maxI)
					}
					lo, hi := time.Duration(float64(base)*c.lo), min(time.Duration(float64(base)*c.hi), maxI)
					if d < lo-1 || d > hi {
						t.Fatalf("n=%d: %s outside [%s, %s]", n, d, lo, hi)
					}
					distinct[d] = true
				}
				if c.lo != c.hi && len(distinct) < 50 {
					t.Fatalf("n=%d: only %d distinct waits: no jitter", n, len(distinct))
				}
				if c.lo == c.hi && len(distinct) != 1 {
					t.Fatalf("n=%d: jitter none gave %d distinct waits", n, len(distinct))
				}
			}
		})
	}
}
