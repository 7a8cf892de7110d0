package mirror

import (
	"context"
	"time"

	"github.com/starflow/starflow/state"
)

// Health levels (Health.Warm).
const (
	HealthOK       = "ok"
	HealthWarning  = "warning"
	HealthCritical = "critical"
)

// Health is the warm tier's health answer, encoded as JSON by the HTTP
// layer: {"warm": "ok", "outbox_pending": 0, "oldest_age_seconds": 0,
// "warm_reachable": true}.
//
// Warm is HealthCritical when the oldest unapplied outbox row is older
// than Config.CriticalAfter or the outbox cannot be read (Error says
// why); HealthWarning when it is older than Config.WarningAfter or the
// warm store does not answer a ping; HealthOK otherwise.
type Health struct {
	Warm             string  `json:"warm"`
	OutboxPending    int64   `json:"outbox_pending"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	WarmReachable    bool    `json:"warm_reachable"`
	Error            string  `json:"error,omitempty"`
}

// Health reads the outbox statistics (database clock) and pings the warm
// store (1 s timeout), updates the gauges, and answers. It never fails:
// errors are in the answer.
func (m *Adapter) Health(ctx context.Context) Health {
	h := Health{Warm: HealthOK}
	pctx, cancel := context.WithTimeout(ctx, healthPingTimeout)
	h.WarmReachable = m.cfg.Warm.Ping(pctx) == nil
	cancel()
	if h.WarmReachable {
		m.metrics.Reachable.Set(1)
	} else {
		m.metrics.Reachable.Set(0)
		h.Warm = HealthWarning
	}
	if m.outbox == nil {
		return h
	}
	st, err := m.outbox.OutboxStats(ctx, &state.OutboxStatsParams{Bounds: AgeBounds})
	if err != nil {
		h.Warm, h.Error = HealthCritical, err.Error()
		return h
	}
	for i, l := range AgeLabels {
		m.metrics.Pending.WithLabelValues(l).Set(float64(st.Buckets[i]))
	}
	m.metrics.OldestAge.Set(st.OldestAge.Seconds())
	h.OutboxPending = st.Pending
	h.OldestAgeSeconds = st.OldestAge.Seconds()
	if l := Level(m.cfg, st.OldestAge); l != HealthOK {
		h.Warm = l
	}
	return h
}

// Level returns the health level of a lag under the thresholds of cfg
// (defaults applied): the rule Health uses.
func Level(cfg Config, oldest time.Duration) string {
	cfg = cfg.WithDefaults()
	switch {
	case oldest > cfg.CriticalAfter:
		return HealthCritical
	case oldest > cfg.WarningAfter:
		return HealthWarning
	}
	return HealthOK
}
