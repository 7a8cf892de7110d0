package faultpoint

import (
	"sync/atomic"
	"time"
)

// ClockSkewEnvVar names the environment variable of the runner clock's
// skew (a Go duration, "45s" or "-45s"). Only binaries built with -tags
// chaos read it; this package never does.
const ClockSkewEnvVar = "STARFLOW_CHAOS_CLOCK_SKEW"

var skew atomic.Int64 // nanoseconds

// SetClockSkew makes Now run d ahead (d < 0: behind) of the wall clock.
func SetClockSkew(d time.Duration) { skew.Store(int64(d)) }

// Now is the wall clock plus the skew set by SetClockSkew (none by
// default): the engine's default clock (engine.Config.Now).
func Now() time.Time {
	if d := skew.Load(); d != 0 {
		return time.Now().Add(time.Duration(d))
	}
	return time.Now()
}
