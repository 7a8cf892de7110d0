package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// ageValue is a retention age flag: days or a Go duration (7d, 1d12h,
// 36h), or "never".
type ageValue struct{ d *time.Duration }

func (a ageValue) String() string {
	switch {
	case a.d == nil:
		return ""
	case *a.d < 0:
		return "never"
	case *a.d%(24*time.Hour) == 0 && *a.d > 0:
		return fmt.Sprintf("%dd", *a.d/(24*time.Hour))
	}
	return a.d.String()
}

func (a ageValue) Set(s string) error {
	if strings.TrimSpace(s) == "never" {
		*a.d = state.RetainForever
		return nil
	}
	d, err := workflow.ParseAge(s)
	if err != nil {
		return fmt.Errorf("%v, or never", err)
	}
	if d < time.Minute {
		return fmt.Errorf("age %q is less than a minute", s)
	}
	*a.d = d
	return nil
}

func (ageValue) Type() string { return "age" }

// retentionFlags are the retention ages (gc, and the maintenance pass of
// server and dev) and, for the pass, its interval.
type retentionFlags struct {
	p        state.GCParams
	interval time.Duration
}

// register adds the age flags and, with pass, --retention-interval.
func (f *retentionFlags) register(cmd *cobra.Command, pass bool) {
	f.p = f.p.WithDefaults()
	fl := cmd.Flags()
	fl.Var(ageValue{&f.p.Succeeded}, "retain-succeeded", "how long succeeded runs are kept after they ended (days like 7d, or a duration like 36h; never keeps them); a definition's retention.succeeded overrides it")
	fl.Var(ageValue{&f.p.Failed}, "retain-failed", "how long failed and cancelled runs are kept after they ended (dead-lettered ones: --retain-held); a definition's retention.failed overrides it")
	fl.Var(ageValue{&f.p.Held}, "retain-held", "how long runs held for an operator (interrupted in recovery mode manual, dead-lettered) are kept after their last change")
	fl.Var(ageValue{&f.p.Consumed}, "retain-consumed", "how long consumed waits and wake-inbox rows of runs that stay are kept")
	fl.IntVar(&f.p.Batch, "gc-batch", state.GCBatchDefault, "rows of each kind removed per transaction")
	fl.Float64Var(&f.p.Throttle, "gc-throttle", 0, "after each batch, wait this many times as long as the batch took (0: no wait, fastest, most load on the database)")
	if pass {
		fl.DurationVar(&f.interval, "retention-interval", time.Hour, "how often the maintenance leader removes what is older than the --retain-* ages (0s turns the pass off: only starflow gc removes)")
	}
}

// config is the engine's RetentionConfig.
func (f *retentionFlags) config() starflow.RetentionConfig {
	c := starflow.RetentionConfig{Interval: f.interval, Params: f.p}
	if f.interval == 0 {
		c.Interval = -1
	}
	return c
}
