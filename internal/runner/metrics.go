package runner

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/starflowtype"
)

// Metrics are the runner's Prometheus metrics: claims (each claimed
// run's queue wait, each claim statement's duration), lease refreshes and
// lease losses. Config.Metrics; the root package registers Collectors on
// the engine's registry. A nil *Metrics records nothing.
type Metrics struct {
	claimWait     *prometheus.HistogramVec
	claimDuration *prometheus.HistogramVec
	refreshes     *prometheus.CounterVec
	losses        *prometheus.CounterVec
}

// ClaimWaitBuckets are the upper bounds, in seconds, of
// starflow_claim_wait_seconds: 10 ms to an hour.
var ClaimWaitBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// ClaimDurationBuckets are the upper bounds, in seconds, of
// starflow_claim_duration_seconds: 0.5 ms to 5 s.
var ClaimDurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}

// Labels of starflow_lease_losses_total{reason}.
const (
	LossRefused      = "refused"       // a heartbeat was told the lease is no longer this runner's
	LossExpired      = "expired"       // no heartbeat got through within 0.9 × TTL: the runner gave the run up
	LossWriteRefused = "write_refused" // a fenced write of the run matched no row (another runner holds it)
	LossWriteFailed  = "write_failed"  // a write of the run failed otherwise: the run is left to the sweep
)

// NewMetrics returns the runner's metrics, not registered.
func NewMetrics() *Metrics {
	m := &Metrics{
		claimWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "starflow_claim_wait_seconds",
			Help:    "Queue wait of each run this process's runner claimed: from its available_at (enqueue, retry backoff's end, wake, release) to its claim, on the database clock, by runner pool (\"\" = no pool).",
			Buckets: ClaimWaitBuckets}, []string{"pool"}),
		claimDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "starflow_claim_duration_seconds",
			Help:    "Duration of each claim statement of this process's runner, by result (claimed: it claimed runs, empty: nothing claimable, error).",
			Buckets: ClaimDurationBuckets}, []string{"result"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_lease_refreshes_total",
			Help: "Lease refreshes (heartbeats) of runs in flight, by result (ok, failed: retried until the lease would expire, lost: the store says another runner holds it)."},
			[]string{"result"}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_lease_losses_total",
			Help: "Run executions this process's runner abandoned because it lost (or could no longer prove) the lease, by reason (refused, expired, write_refused, write_failed)."},
			[]string{"reason"}),
	}
	// The fixed label values are present at 0, so rate() and alerts see
	// them before the first event.
	for _, r := range []string{"ok", "failed", "lost"} {
		m.refreshes.WithLabelValues(r)
	}
	for _, r := range []string{LossRefused, LossExpired, LossWriteRefused, LossWriteFailed} {
		m.losses.WithLabelValues(r)
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.claimWait, m.claimDuration, m.refreshes, m.losses}
}

// claimed records one claim statement that took took, and the queue wait
// of each run it claimed: its claim time (lease_until − ttl, database
// clock) − its available_at.
func (m *Metrics) claimed(runs []*starflowtype.Run, err error, took, ttl time.Duration) {
	if m == nil {
		return
	}
	result := "claimed"
	switch {
	case err != nil:
		result = "error"
	case len(runs) == 0:
		result = "empty"
	}
	m.claimDuration.WithLabelValues(result).Observe(took.Seconds())
	for _, r := range runs {
		if r.LeaseUntil.IsZero() || r.AvailableAt.IsZero() {
			continue
		}
		m.claimWait.WithLabelValues(r.RunnerPool).Observe(max(r.LeaseUntil.Add(-ttl).Sub(r.AvailableAt).Seconds(), 0))
	}
}

// refreshed records one lease refresh's result (ctx: the run's; a
// refresh cut off because the run ended is not counted). A refresh that
// raced the run's own end (which cleared the lease) reads lost too; lease
// losses are counted by executed, from the execution's outcome.
func (m *Metrics) refreshed(ctx context.Context, err error) {
	if m == nil || (err != nil && ctx.Err() != nil && !errors.Is(err, starflowtype.ErrLeaseLost)) {
		return
	}
	result := "ok"
	switch {
	case errors.Is(err, starflowtype.ErrLeaseLost):
		result = "lost"
	case err != nil:
		result = "failed"
	}
	m.refreshes.WithLabelValues(result).Inc()
}

// executed records an execution that ended with a lost lease, once, by
// reason: the heartbeat cancels the run with exactly
// starflowtype.ErrLeaseLost when the store refused a refresh, and with an
// error wrapping it when no refresh got through in time; otherwise a
// write of the run was refused (fenced) or failed. An execution that
// ended otherwise lost nothing, even if a refresh raced its end.
func (m *Metrics) executed(ctx context.Context, outcome engine.Outcome, err error) {
	if m == nil || outcome != engine.OutcomeLeaseLost {
		return
	}
	cause := context.Cause(ctx)
	reason := LossWriteFailed
	switch {
	case cause == starflowtype.ErrLeaseLost: //nolint:errorlint // the heartbeat's own value, not a wrapped one
		reason = LossRefused
	case errors.Is(cause, starflowtype.ErrLeaseLost):
		reason = LossExpired
	case errors.Is(err, starflowtype.ErrLeaseLost):
		reason = LossWriteRefused
	}
	m.losses.WithLabelValues(reason).Inc()
}
