//go:build chaos

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/starflow/starflow/internal/faultpoint"
)

// chaosBuild says the binary has the fault layer's environment wiring
// (`starflow version --json` reports "chaos": true).
const chaosBuild = true

// chaosSetup installs the fault rules of STARFLOW_FAULTS and the runner
// clock's skew of STARFLOW_CHAOS_CLOCK_SKEW (docs/faults.md). Only this
// -tags chaos build reads them; a bad value is an error (exit 2).
func chaosSetup() error {
	if spec := os.Getenv(faultpoint.RulesEnvVar); spec != "" {
		r, err := faultpoint.Parse(spec)
		if err != nil {
			return fmt.Errorf("%s: %w", faultpoint.RulesEnvVar, err)
		}
		faultpoint.Set(r)
	}
	if v := os.Getenv(faultpoint.ClockSkewEnvVar); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (45s, -45s)", faultpoint.ClockSkewEnvVar, v)
		}
		faultpoint.SetClockSkew(d)
	}
	return nil
}
