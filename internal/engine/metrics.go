package engine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/starflowtype"
)

// Metrics are the interpreter's Prometheus metrics: runs started and
// ended, run retries, step tries, step retries and step durations, by
// workflow name (and step kind). Config.Metrics; the root package
// registers Collectors on the engine's registry. A nil *Metrics records
// nothing.
//
// What they count (decisions 211, 212): a run is started once, by the
// execution of its first claim; it ends once, when an attempt's end
// leaves it succeeded, failed, dead_lettered, cancelled or interrupted
// (held for an operator); an attempt that fails and is queued again is a
// run retry, not an end. A step instance's end (node_complete or
// node_error) is one observation of the duration histogram: the time
// this execution spent on it, from the moment it began it (its first
// try, a construct's entry, a wait's entry or re-entry after a wake) to
// the end's commit — a durable wait's time parked is not in it.
type Metrics struct {
	runsStarted  *prometheus.CounterVec
	runsEnded    *prometheus.CounterVec
	runRetries   *prometheus.CounterVec
	stepTries    *prometheus.CounterVec
	stepRetries  *prometheus.CounterVec
	stepDuration *prometheus.HistogramVec
}

// StepDurationBuckets are the upper bounds, in seconds, of
// starflow_step_duration_seconds: 1 ms to 5 min.
var StepDurationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Run end statuses of starflow_runs_ended_total{status} (RunEnd).
const (
	EndSucceeded    = "succeeded"
	EndFailed       = "failed"
	EndDeadLettered = "dead_lettered"
	EndCancelled    = "cancelled"
	EndInterrupted  = "interrupted"
)

// NewMetrics returns the interpreter's metrics, not registered.
func NewMetrics() *Metrics {
	wf := []string{"workflow"}
	return &Metrics{
		runsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_runs_started_total",
			Help: "Runs this process's runner started (the execution of a run's first claim), by workflow."}, wf),
		runsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_runs_ended_total",
			Help: "Runs that ended, by workflow and status (succeeded, failed, dead_lettered, cancelled, interrupted: held for an operator); counted by the process that wrote the end (runner, lease sweep, operator cancel, a schedule's cancel_previous). A retried attempt is not an end (starflow_run_retries_total)."},
			[]string{"workflow", "status"}),
		runRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_run_retries_total",
			Help: "Run attempts that failed (or whose runner was lost) and were queued again for a new attempt, by workflow."}, wf),
		stepTries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_step_tries_total",
			Help: "Step tries started (node_start written; a construct or wait counts its one entry), by workflow and step kind."},
			[]string{"workflow", "kind"}),
		stepRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_step_retries_total",
			Help: "Step tries that failed and will be retried (node_retry written), by workflow and step kind."},
			[]string{"workflow", "kind"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "starflow_step_duration_seconds",
			Help:    "Time an execution spent on a step instance, from beginning it to committing its end (succeeded, failed or cancelled), tries and backoffs included, a durable wait's parked time not, by workflow, step kind and status.",
			Buckets: StepDurationBuckets}, []string{"workflow", "kind", "status"}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.runsStarted, m.runsEnded, m.runRetries, m.stepTries, m.stepRetries, m.stepDuration}
}

// RunEnd classifies a run as a write left it: its end status (one of the
// End* constants) when it ended, retried when it was queued again for a
// new attempt, neither when it goes on (running, paused, queued after a
// wake or a release).
func RunEnd(r *starflowtype.Run) (status string, retried bool) {
	switch {
	case r == nil:
		return "", false
	case r.Status == starflowtype.RunSucceeded:
		return EndSucceeded, false
	case r.Status == starflowtype.RunCancelled:
		return EndCancelled, false
	case r.Status == starflowtype.RunFailed && r.DeadLettered:
		return EndDeadLettered, false
	case r.Status == starflowtype.RunFailed:
		return EndFailed, false
	case r.Status == starflowtype.RunInterrupted && r.ClaimState == starflowtype.ClaimQueued:
		return "", true
	case r.Status == starflowtype.RunInterrupted:
		return EndInterrupted, false
	}
	return "", false
}

// RunWritten counts what a write left run r as (RunEnd): an end or a
// retry. The lease sweep and operator cancels report theirs here.
func (m *Metrics) RunWritten(r *starflowtype.Run) {
	if m == nil || r == nil {
		return
	}
	switch status, retried := RunEnd(r); {
	case retried:
		m.runRetries.WithLabelValues(r.WorkflowName).Inc()
	case status != "":
		m.runsEnded.WithLabelValues(r.WorkflowName, status).Inc()
	}
}

// runMeter is one execution's view of the metrics: the workflow label
// and when each step instance began (for its duration). nil records
// nothing.
type runMeter struct {
	m        *Metrics
	workflow string

	mu    sync.Mutex
	began map[string]stepBegin // by scope + "\x00" + step id
}

type stepBegin struct {
	at   time.Time
	kind string
}

// executing returns the meter of one execution of run, and counts the
// run started when this is its first claim.
func (m *Metrics) executing(run *starflowtype.Run) *runMeter {
	if m == nil {
		return nil
	}
	if run.ClaimAttempts == 1 {
		m.runsStarted.WithLabelValues(run.WorkflowName).Inc()
	}
	return &runMeter{m: m, workflow: run.WorkflowName, began: map[string]stepBegin{}}
}

// begin notes that the execution begins a step instance now.
func (r *runMeter) begin(scope, stepID, kind string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.began[scope+"\x00"+stepID] = stepBegin{at: time.Now(), kind: kind}
	r.mu.Unlock()
}

// tried counts a try whose start was written (err nil) and returns err.
func (r *runMeter) tried(kind string, err error) error {
	if r != nil && err == nil {
		r.m.stepTries.WithLabelValues(r.workflow, kind).Inc()
	}
	return err
}

// retried counts a retry that was written (err nil) and returns err.
func (r *runMeter) retried(scope, stepID string, err error) error {
	if r == nil || err != nil {
		return err
	}
	r.mu.Lock()
	kind := r.began[scope+"\x00"+stepID].kind
	r.mu.Unlock()
	r.m.stepRetries.WithLabelValues(r.workflow, kind).Inc()
	return err
}

// ended observes a step instance's end that was written (err nil), with
// status succeeded, failed or cancelled; withStart: the end wrote its
// try's start too (a pure step), which counts as a try. It returns err.
func (r *runMeter) ended(scope, stepID, kind, status string, withStart bool, err error) error {
	if r == nil || err != nil {
		return err
	}
	if withStart {
		r.m.stepTries.WithLabelValues(r.workflow, kind).Inc()
	}
	k := scope + "\x00" + stepID
	r.mu.Lock()
	b, ok := r.began[k]
	delete(r.began, k)
	r.mu.Unlock()
	var d float64
	if ok {
		d = time.Since(b.at).Seconds()
	}
	r.m.stepDuration.WithLabelValues(r.workflow, kind, status).Observe(d)
	return err
}

// run counts what a run write left the run as (RunWritten) and returns
// its results.
func (r *runMeter) run(run *starflowtype.Run, err error) (*starflowtype.Run, error) {
	if r != nil && err == nil {
		r.m.RunWritten(run)
	}
	return run, err
}

// stepStatus is the status label of a step end.
func stepStatus(cancelled bool) string {
	if cancelled {
		return string(starflowtype.StepCancelled)
	}
	return string(starflowtype.StepFailed)
}
