package starflow

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of WarmOptions (SPEC §8).
const (
	// HealthWarningDefault: the warm level is warning when the oldest
	// unapplied outbox row is older than this.
	HealthWarningDefault = 2 * time.Second
	// HealthCriticalDefault: the warm level is critical past this age.
	HealthCriticalDefault = 30 * time.Second
	// HashSweepIntervalDefault is the period of the hash-compare sweep.
	HashSweepIntervalDefault = 30 * time.Second
	// PresenceIntervalDefault is how often a runner republishes its
	// presence; PresenceTTL defaults to three times the interval.
	PresenceIntervalDefault = 5 * time.Second
)

// WarmOptions tune the warm tier of an engine with Config.Warm. Zero
// fields take the defaults named; durations must not be negative.
type WarmOptions struct {
	// DrainPoll is how often the drainer looks for unapplied outbox rows
	// when nothing signalled new ones. Default: the mirror's (100 ms).
	DrainPoll time.Duration
	// HashSweepInterval is the period of the hash-compare sweep that
	// corrects divergent or missing warm entries. Default 30 s.
	HashSweepInterval time.Duration
	// HealthWarning / HealthCritical are the ages of the oldest unapplied
	// outbox row past which Health says warning / critical. Defaults 2 s
	// and 30 s; HealthCritical must exceed HealthWarning.
	HealthWarning, HealthCritical time.Duration
	// OutboxRetention is how long applied outbox rows are kept before the
	// drainer prunes them. Default: the mirror's (1 h).
	OutboxRetention time.Duration
	// FinishedWithin: the hash sweep also checks runs finished this
	// recently (the warm store's retention of finished runs). Default:
	// the mirror's (24 h).
	FinishedWithin time.Duration
	// PresenceInterval is how often the runner republishes its presence.
	// Default 5 s. PresenceTTL is how long a presence lives without being
	// republished. Default 3 × PresenceInterval.
	PresenceInterval, PresenceTTL time.Duration
	// NoDrain disables the drainer and the hash sweep in this process
	// (another process drains); presence and progress still go to warm.
	NoDrain bool
}

// withDefaults fills zero fields and checks the rest.
func (o WarmOptions) withDefaults() (WarmOptions, error) {
	for name, d := range map[string]time.Duration{
		"DrainPoll": o.DrainPoll, "HashSweepInterval": o.HashSweepInterval, "HealthWarning": o.HealthWarning,
		"HealthCritical": o.HealthCritical, "OutboxRetention": o.OutboxRetention, "FinishedWithin": o.FinishedWithin,
		"PresenceInterval": o.PresenceInterval, "PresenceTTL": o.PresenceTTL,
	} {
		if d < 0 {
			return o, fmt.Errorf("starflow: WarmOptions.%s is negative (%s)", name, d)
		}
	}
	if o.HashSweepInterval == 0 {
		o.HashSweepInterval = HashSweepIntervalDefault
	}
	if o.HealthWarning == 0 {
		o.HealthWarning = HealthWarningDefault
	}
	if o.HealthCritical == 0 {
		o.HealthCritical = HealthCriticalDefault
		if o.HealthCritical <= o.HealthWarning {
			o.HealthCritical = 15 * o.HealthWarning
		}
	}
	if o.HealthCritical <= o.HealthWarning {
		return o, fmt.Errorf("starflow: WarmOptions.HealthCritical (%s) must exceed HealthWarning (%s)", o.HealthCritical, o.HealthWarning)
	}
	if o.PresenceInterval == 0 {
		o.PresenceInterval = PresenceIntervalDefault
	}
	if o.PresenceTTL == 0 {
		o.PresenceTTL = 3 * o.PresenceInterval
	}
	if o.PresenceTTL <= o.PresenceInterval {
		return o, errors.New("starflow: WarmOptions.PresenceTTL must exceed PresenceInterval")
	}
	return o, nil
}

// warmTier is the engine's warm-tier machinery (drainer, hash sweep,
// presence, progress, health, metrics).
type warmTier struct {
	opts WarmOptions
}
