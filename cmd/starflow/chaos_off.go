//go:build !chaos

package main

// chaosBuild says the binary has the fault layer's environment wiring; a
// production build has not: STARFLOW_FAULTS and STARFLOW_CHAOS_CLOCK_SKEW
// are ignored (docs/faults.md).
const chaosBuild = false

// chaosSetup does nothing outside -tags chaos builds.
func chaosSetup() error { return nil }
