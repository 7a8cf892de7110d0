package starflow

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/internal/maintenance"
)

// stuckMetrics exports the maintenance leader's latest stuck tally as
// starflow_runs_stuck{reason} (a gauge per reason, every reason present)
// and starflow_runs_stuck_age_seconds{reason} (a histogram of the runs'
// ages: how long each has been in its state). A process that does not
// lead exports neither, so a sum over every process counts each run once.
type stuckMetrics struct {
	count, age *prometheus.Desc

	mu    sync.Mutex
	tally *maintenance.StuckTally // nil: not leading
}

func newStuckMetrics() *stuckMetrics {
	return &stuckMetrics{
		count: prometheus.NewDesc("starflow_runs_stuck",
			"Unfinished runs by why-stuck reason (waiting_signal, queued_no_runner, lease_stale, …), counted from the cold store by the maintenance leader every StuckInterval (default 15 s); only the leader exports it.",
			[]string{"reason"}, nil),
		age: prometheus.NewDesc("starflow_runs_stuck_age_seconds",
			"How long each unfinished run has been in its why-stuck state (since the wait began, the lease ran out, the run became claimable, …), by reason; exported by the maintenance leader only.",
			[]string{"reason"}, nil),
	}
}

// set records a tally (nil: stop exporting).
func (m *stuckMetrics) set(t *maintenance.StuckTally) {
	m.mu.Lock()
	m.tally = t
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *stuckMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.count
	ch <- m.age
}

// Collect implements prometheus.Collector.
func (m *stuckMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	t := m.tally
	m.mu.Unlock()
	if t == nil {
		return
	}
	for reason, rt := range t.Reasons {
		ch <- prometheus.MustNewConstMetric(m.count, prometheus.GaugeValue, float64(rt.Count), string(reason))
		buckets := make(map[float64]uint64, len(t.Buckets))
		var cum uint64
		for i, le := range t.Buckets {
			cum += uint64(rt.Bins[i])
			buckets[le] = cum
		}
		ch <- prometheus.MustNewConstHistogram(m.age, uint64(rt.Count), rt.AgeSum, buckets, string(reason))
	}
}
