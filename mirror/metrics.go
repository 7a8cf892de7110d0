package mirror

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AgeBounds are the upper bounds of the starflow_outbox_pending age
// buckets; AgeLabels name the buckets (the last one is older than the last
// bound).
var (
	AgeBounds = []time.Duration{time.Second, 2 * time.Second, 30 * time.Second}
	AgeLabels = []string{"lt_1s", "1s_2s", "2s_30s", "gt_30s"}
)

// Correction reasons (label reason of starflow_warm_corrections_total).
const (
	ReasonMissing  = "missing"
	ReasonDiverged = "diverged"
)

// Metrics are the drift signals of the warm tier (SPEC §8), as Prometheus
// collectors:
//
//	starflow_outbox_pending{age}            gauge: unapplied mirror_outbox rows by age bucket (AgeLabels); their sum is the depth
//	starflow_outbox_oldest_age_seconds      gauge: age of the oldest unapplied row (database clock), 0 when none
//	starflow_warm_corrections_total{reason} counter: warm entries the sweep repaired, reason missing or diverged
//	starflow_warm_reachable                 gauge: 1 when the warm store answered its last ping, else 0
//	starflow_outbox_applied_total           counter: rows applied to the warm store
//	starflow_outbox_stale_total             counter: run rows the warm store refused as older than its entry (version CAS)
//	starflow_outbox_skipped_total           counter: rows marked applied without a warm write (event rows, undecodable payloads)
//	starflow_outbox_drain_errors_total      counter: drain passes that stopped on an error (warm store failing)
//	starflow_outbox_drain_lag_seconds       histogram: commit-to-apply lag of each applied row (row created_at to apply, local clock)
//	starflow_outbox_pruned_total            counter: applied rows deleted after the retention
//	starflow_warm_sweeps_total              counter: completed hash-compare sweeps
//	starflow_warm_reconciles_total{result}  counter: end-of-run reconciliations (ok, corrected, skipped)
//
// The gauges are refreshed by Adapter.Run every Config.StatsInterval and by
// every Health call.
type Metrics struct {
	Pending     *prometheus.GaugeVec
	OldestAge   prometheus.Gauge
	Corrections *prometheus.CounterVec
	Reachable   prometheus.Gauge
	Applied     prometheus.Counter
	Stale       prometheus.Counter
	Skipped     prometheus.Counter
	DrainErrors prometheus.Counter
	DrainLag    prometheus.Histogram
	Pruned      prometheus.Counter
	Sweeps      prometheus.Counter
	Reconciles  *prometheus.CounterVec
}

// NewMetrics creates the collectors and, when reg is not nil, registers
// them with it (an error names the collector that failed, e.g. a second
// registration on the same registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "starflow_outbox_pending",
			Help: "Unapplied mirror_outbox rows by age bucket (lt_1s, 1s_2s, 2s_30s, gt_30s); the sum is the outbox depth."}, []string{"age"}),
		OldestAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "starflow_outbox_oldest_age_seconds",
			Help: "Age in seconds of the oldest unapplied mirror_outbox row (database clock); 0 when none."}),
		Corrections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_warm_corrections_total",
			Help: "Warm run entries repaired by the hash-compare sweep or end-of-run reconciliation, by reason (missing, diverged)."}, []string{"reason"}),
		Reachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "starflow_warm_reachable",
			Help: "1 when the warm store answered its last ping, else 0."}),
		Applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_outbox_applied_total",
			Help: "mirror_outbox rows applied to the warm store."}),
		Stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_outbox_stale_total",
			Help: "Run rows not written because the warm entry had an equal or newer version."}),
		Skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_outbox_skipped_total",
			Help: "mirror_outbox rows marked applied without a warm write (event rows, undecodable payloads)."}),
		DrainErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_outbox_drain_errors_total",
			Help: "Drain passes that stopped on an error (the rows stay unapplied and are retried)."}),
		DrainLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "starflow_outbox_drain_lag_seconds",
			Help:    "Seconds from a mirror_outbox row's creation to its application to the warm store.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300}}),
		Pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_outbox_pruned_total",
			Help: "Applied mirror_outbox rows deleted after the retention."}),
		Sweeps: prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_warm_sweeps_total",
			Help: "Completed hash-compare sweeps of the warm tier."}),
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_warm_reconciles_total",
			Help: "End-of-run reconciliations by result (ok, corrected, skipped)."}, []string{"result"}),
	}
	for _, l := range AgeLabels {
		m.Pending.WithLabelValues(l)
	}
	for _, r := range []string{ReasonMissing, ReasonDiverged} {
		m.Corrections.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("mirror: register metrics"), err)
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Pending, m.OldestAge, m.Corrections, m.Reachable, m.Applied, m.Stale,
		m.Skipped, m.DrainErrors, m.DrainLag, m.Pruned, m.Sweeps, m.Reconciles}
}
