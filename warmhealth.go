package starflow

import (
	"context"
	"time"

	"github.com/starflow/starflow/state"
)

// WarmLevel is the warm tier's drift level on the health answer (SPEC §8):
// WarmOK, WarmWarning (the oldest unapplied outbox row is older than the
// warning threshold, default 2 s) or WarmCritical (older than the critical
// threshold, default 30 s); WarmNone when the engine has no warm tier.
type WarmLevel string

// The warm levels.
const (
	WarmOK       WarmLevel = "ok"
	WarmWarning  WarmLevel = "warning"
	WarmCritical WarmLevel = "critical"
	WarmNone     WarmLevel = "none"
)

// Health is the health answer (GET /healthz of `starflow dev|server`).
//
// Status is "ok" when the cold store answers and "unavailable" when it does
// not: the only condition that stops the engine. Warm says how far the warm
// tier lags the cold one: live views may be stale, nothing else is
// affected (the cold tier stays authoritative).
type Health struct {
	// Status is "ok" or "unavailable" (the cold store does not answer).
	Status string `json:"status"`
	// StoreOK reports whether the cold store answered a read.
	StoreOK bool `json:"store_ok"`
	// StoreError is "cold store unreachable" when it did not answer. The
	// driver's error (which can name the database, its user, a schema or a
	// SQLSTATE) goes to the engine's log only, never into the answer.
	StoreError string `json:"store_error,omitempty"`
	// Warm is ok, warning or critical; none without a warm tier (then
	// WarmEnabled and WarmReachable are false, and nothing is wrong).
	Warm WarmLevel `json:"warm"`
	// WarmEnabled reports whether the engine has a warm store.
	WarmEnabled bool `json:"warm_enabled"`
	// WarmReachable reports whether the warm store answered a ping.
	WarmReachable bool `json:"warm_reachable"`
	// WarmError is the warm store's error when it did not.
	WarmError string `json:"warm_error,omitempty"`
	// OutboxPending is the number of unapplied mirror_outbox rows.
	OutboxPending int64 `json:"outbox_pending"`
	// OutboxOldestAgeSeconds is the age of the oldest unapplied row in
	// seconds (0 when none).
	OutboxOldestAgeSeconds float64 `json:"outbox_oldest_age_seconds"`
	// OutboxError is "outbox unreadable" when the outbox read failed (the
	// driver's error goes to the log only).
	OutboxError string `json:"outbox_error,omitempty"`
	// RunnerID is the in-process runner's identity ("" without one).
	RunnerID string `json:"runner_id,omitempty"`
	// CheckedAt is when the answer was computed.
	CheckedAt time.Time `json:"checked_at"`
}

// The fixed texts of Health.StoreError and Health.OutboxError.
const (
	HealthStoreUnreachable = "cold store unreachable"
	HealthOutboxUnreadable = "outbox unreadable"
)

// Health answers the health check: the cold store answers a read, and,
// with a warm tier, the outbox depth, the age of its oldest unapplied row
// (database clock) and the warm store's reachability, with the warm level
// from WarmOptions.HealthWarning / HealthCritical (an unreachable warm
// store is at least warning). It never fails: failures are in the answer
// as fixed texts, with the drivers' errors logged (Config.Logger, warn).
// It also refreshes the outbox gauges of Metrics.
func (e *Engine) Health(ctx context.Context) Health {
	h := Health{Status: "ok", StoreOK: true, Warm: WarmOK, CheckedAt: time.Now().UTC()}
	if !e.cfg.NoRunner {
		h.RunnerID = e.runner.ID()
	}
	if _, err := e.cfg.Store.ListRuns(ctx, &state.ListRunsParams{WorkspaceID: e.cfg.Workspace, Limit: 1}); err != nil {
		e.cfg.Logger.Warn("health: the cold store did not answer", "error", err)
		h.Status, h.StoreOK, h.StoreError = "unavailable", false, HealthStoreUnreachable
	}
	if e.tier.mirror == nil {
		h.Warm = WarmNone
		return h
	}
	h.WarmEnabled = true
	mh := e.tier.mirror.Health(ctx)
	h.Warm = WarmLevel(mh.Warm)
	h.WarmReachable = mh.WarmReachable
	h.OutboxPending = mh.OutboxPending
	h.OutboxOldestAgeSeconds = mh.OldestAgeSeconds
	if mh.Error != "" {
		e.cfg.Logger.Warn("health: the outbox could not be read", "error", mh.Error)
		h.OutboxError = HealthOutboxUnreadable
	}
	if !h.WarmReachable {
		h.WarmError = "the warm store did not answer a ping"
	}
	return h
}
