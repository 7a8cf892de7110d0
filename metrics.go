package starflow

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/runner"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// metrics are the engine's metrics beyond the warm tier's (warm.go) and
// the stuck watch's (stuckmetrics.go): the interpreter's and the runner's
// (internal/engine, internal/runner), wake outcomes, lease-sweep passes
// and recoveries, the leader's queue depths and the store's group
// commits. All go to the engine's registry (Engine.Metrics); see
// docs/operations.md, "Metrics".
type metrics struct {
	engine *engine.Metrics
	runner *runner.Metrics

	wakes           *prometheus.CounterVec
	sweepPasses     *prometheus.CounterVec
	sweepRecoveries *prometheus.CounterVec
	queue           *queueMetrics
}

// Labels of starflow_wakes_total{via, outcome}.
const (
	WakeWoken        = "woken"         // a wait was woken (its run re-queued)
	WakeHeld         = "held"          // a signal no wait takes yet, kept in the wake inbox
	WakeInvalidToken = "invalid_token" // forged, malformed, signed by an unknown key, or another run's
	WakeUnknownToken = "unknown_token" // well signed, but no wait has it
	WakeClosed       = "closed"        // already used, expired, or the wait timed out or was cancelled
	WakeBadPayload   = "bad_payload"   // not one JSON value, a non-finite number, over the limit
	WakeUnknownRun   = "unknown_run"   // a signal to a run that does not exist
	WakeRunEnded     = "run_ended"     // a signal to a run that has ended
	WakeRefused      = "refused"       // an invalid request (a reserved signal name)
	WakeError        = "error"         // the store failed
	WakeTimedOut     = "timed_out"     // a wait's timeout passed (via timer)
)

func newMetrics(reg *prometheus.Registry, cold state.Adapter) *metrics {
	m := &metrics{
		engine: engine.NewMetrics(),
		runner: runner.NewMetrics(),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_wakes_total",
			Help: "Wakes this process handled, by how they arrived (token: a wake token; signal: a named signal; timer: the timer poller) and outcome (woken, held, invalid_token, unknown_token, closed, bad_payload, unknown_run, run_ended, refused, error; timed_out for a timer)."},
			[]string{"via", "outcome"}),
		sweepPasses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_sweep_passes_total",
			Help: "Lease-sweep passes this process ran (the maintenance leader's and on-demand ones), by result (ok, error)."},
			[]string{"result"}),
		sweepRecoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_sweep_recoveries_total",
			Help: "Runs whose expired lease the lease sweep recovered, by outcome (requeued, held: interrupted for an operator, dead_lettered)."},
			[]string{"outcome"}),
		queue: newQueueMetrics(),
	}
	reg.MustRegister(m.engine.Collectors()...)
	reg.MustRegister(m.runner.Collectors()...)
	reg.MustRegister(m.wakes, m.sweepPasses, m.sweepRecoveries, m.queue)
	// The fixed label values are present at 0, so rate() and alerts see
	// them before the first event.
	for _, o := range []string{SweepRequeued, SweepHeld, SweepDeadLettered} {
		m.sweepRecoveries.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "error"} {
		m.sweepPasses.WithLabelValues(r)
	}
	for _, o := range []string{WakeWoken, WakeInvalidToken, WakeUnknownToken, WakeClosed, WakeBadPayload} {
		m.wakes.WithLabelValues("token", o)
	}
	for _, o := range []string{WakeWoken, WakeHeld, WakeUnknownRun, WakeRunEnded, WakeBadPayload} {
		m.wakes.WithLabelValues("signal", o)
	}
	for _, o := range []string{WakeWoken, WakeTimedOut} {
		m.wakes.WithLabelValues("timer", o)
	}
	if cm, ok := cold.(state.CommitMetrics); ok {
		reg.MustRegister(newCommitCollector(cm))
	}
	return m
}

// sweepPassed is the lease sweeps' OnPass: the pass is recorded
// (Engine.Sweeps) and counted, with its recoveries and the runs' ends and
// retries it wrote.
func (e *Engine) sweepPassed(began time.Time, took time.Duration, changed []*starflowtype.Run, err error) {
	e.sweeps.record(began, took, changed, err)
	result := "ok"
	if err != nil {
		result = "error"
	}
	e.metrics.sweepPasses.WithLabelValues(result).Inc()
	for _, r := range changed {
		e.metrics.sweepRecoveries.WithLabelValues(sweepOutcome(r)).Inc()
		e.metrics.engine.RunWritten(r)
	}
}

// countTimer counts a wait the timer poller changed: via timer, outcome
// woken (its timer fell due) or timed_out (its timeout passed).
func (e *Engine) countTimer(w *starflowtype.Wait) {
	outcome := WakeWoken
	if w.Status == starflowtype.WaitTimedOut {
		outcome = WakeTimedOut
	}
	e.metrics.wakes.WithLabelValues("timer", outcome).Inc()
}

// countWake counts a token wake's outcome and returns its results.
func (e *Engine) countWake(w *starflowtype.Wait, err error) (*starflowtype.Wait, error) {
	e.metrics.wakes.WithLabelValues("token", wakeOutcome(err, true)).Inc()
	return w, err
}

// countSignal counts a signal's outcome and returns its results.
func (e *Engine) countSignal(res *state.SignalResult, err error) (*state.SignalResult, error) {
	outcome := wakeOutcome(err, false)
	if err == nil && res.Wait == nil {
		outcome = WakeHeld
	}
	e.metrics.wakes.WithLabelValues("signal", outcome).Inc()
	return res, err
}

// wakeOutcome is the outcome label of a wake (token) or signal error.
func wakeOutcome(err error, token bool) string {
	var overLimit *workflow.LimitError
	switch {
	case err == nil:
		return WakeWoken
	case errors.Is(err, starflowtype.ErrTokenInvalid):
		return WakeInvalidToken
	case errors.Is(err, starflowtype.ErrWaitClosed):
		return WakeClosed
	case errors.Is(err, starflowtype.ErrPayloadInvalid), errors.As(err, &overLimit):
		return WakeBadPayload
	case errors.Is(err, starflowtype.ErrNotFound) && token:
		return WakeUnknownToken
	case errors.Is(err, starflowtype.ErrNotFound):
		return WakeUnknownRun
	case errors.Is(err, starflowtype.ErrConflict):
		return WakeRunEnded
	case errors.Is(err, starflowtype.ErrInvalid):
		return WakeRefused
	}
	return WakeError
}

// countCancel counts an operator's cancel that ended the run at once (a
// run no runner held: queued, paused, interrupted); a running run's
// cancel is counted when its runner writes the end.
func (e *Engine) countCancel(r *starflowtype.Run, err error) (*starflowtype.Run, error) {
	if err == nil && r != nil && r.Status == starflowtype.RunCancelled {
		e.metrics.engine.RunWritten(r)
	}
	return r, err
}

// sweepOutcome is a recovered run's SweepRecovery.Outcome.
func sweepOutcome(r *starflowtype.Run) string {
	switch {
	case r.DeadLettered || r.Status == starflowtype.RunFailed:
		return SweepDeadLettered
	case r.ClaimState == starflowtype.ClaimQueued:
		return SweepRequeued
	}
	return SweepHeld
}

// queueMetrics exports the maintenance leader's latest queue depths as
// starflow_queue_depth{pool} and starflow_queue_oldest_age_seconds{pool}.
// A pool seen in this term that has no claimable run now reads 0; a
// process that does not lead exports neither, so a sum over every process
// counts each run once.
type queueMetrics struct {
	depth, age *prometheus.Desc

	mu     sync.Mutex
	depths map[string]*state.QueueDepth // by pool; nil: not leading
}

func newQueueMetrics() *queueMetrics {
	return &queueMetrics{
		depth: prometheus.NewDesc("starflow_queue_depth",
			"Runs claimable now (queued, available_at passed) by runner pool (\"\" = no pool), every workspace together; counted by the maintenance leader every StuckInterval (default 15 s); only the leader exports it.",
			[]string{"pool"}, nil),
		age: prometheus.NewDesc("starflow_queue_oldest_age_seconds",
			"How long the oldest claimable run of each pool has been claimable (now − its available_at, database clock; 0 when none); maintenance leader only.",
			[]string{"pool"}, nil),
	}
}

// set is the queue watch's OnPass (nil: stop exporting).
func (q *queueMetrics) set(ds []*state.QueueDepth) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ds == nil {
		q.depths = nil
		return
	}
	next := make(map[string]*state.QueueDepth, len(q.depths)+len(ds))
	for pool := range q.depths {
		next[pool] = &state.QueueDepth{Pool: pool}
	}
	for _, d := range ds {
		next[d.Pool] = d
	}
	q.depths = next
}

// Describe implements prometheus.Collector.
func (q *queueMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.depth
	ch <- q.age
}

// Collect implements prometheus.Collector.
func (q *queueMetrics) Collect(ch chan<- prometheus.Metric) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for pool, d := range q.depths {
		ch <- prometheus.MustNewConstMetric(q.depth, prometheus.GaugeValue, float64(d.Count), pool)
		ch <- prometheus.MustNewConstMetric(q.age, prometheus.GaugeValue, d.OldestAgeSeconds, pool)
	}
}

// commitCollector exports a store's group commits (state.CommitMetrics)
// as starflow_store_commit_batch_writes and
// starflow_store_commit_duration_seconds, read at each scrape.
type commitCollector struct {
	store          state.CommitMetrics
	batch, seconds *prometheus.Desc
}

func newCommitCollector(s state.CommitMetrics) *commitCollector {
	return &commitCollector{store: s,
		batch: prometheus.NewDesc("starflow_store_commit_batch_writes",
			"Writes per group commit of this process's cold store (one transaction, one commit for all of them).", nil, nil),
		seconds: prometheus.NewDesc("starflow_store_commit_duration_seconds",
			"Duration of each group commit of this process's cold store, from taking its writes to their outcome.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *commitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.batch
	ch <- c.seconds
}

// Collect implements prometheus.Collector.
func (c *commitCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.CommitMetrics()
	for _, x := range []struct {
		d *prometheus.Desc
		h state.Histogram
	}{{c.batch, st.BatchWrites}, {c.seconds, st.CommitSeconds}} {
		buckets := make(map[float64]uint64, len(x.h.Bounds))
		for i, le := range x.h.Bounds {
			buckets[le] = x.h.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(x.d, x.h.Count, x.h.Sum, buckets)
	}
}
