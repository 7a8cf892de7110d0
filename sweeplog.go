package starflow

import (
	"slices"
	"sync"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// SweepPassesKept is how many of its recent lease-sweep passes that
// recovered a run an engine remembers (Engine.Sweeps).
const SweepPassesKept = 20

// SweepHistory is what the lease sweeps of this process did lately: the
// time of the last pass (whether or not it found anything) and the
// passes that recovered runs, newest first. It is kept in memory only
// and starts empty with the process; the sweeps of other processes (the
// maintenance leader may be another one) are not in it: the cold store's
// recovery events (state.Operator.RecentRecoveries) are.
type SweepHistory struct {
	// LastPassAt is when the last pass began (zero: none yet).
	LastPassAt time.Time `json:"last_pass_at,omitzero"`
	// LastPassDurationMS is how long it took, in milliseconds.
	LastPassDurationMS int64 `json:"last_pass_duration_ms"`
	// LastPassError is SweepPassFailed when the last pass failed (its
	// error is in the log), "" when it did not.
	LastPassError string `json:"last_pass_error,omitempty"`
	// Passes are the last SweepPassesKept passes that recovered a run,
	// newest first.
	Passes []SweepPass `json:"passes"`
}

// SweepPassFailed is SweepHistory.LastPassError of a failed pass.
const SweepPassFailed = "the last sweep pass failed (the process log has the error)"

// SweepPass is one lease-sweep pass that recovered runs.
type SweepPass struct {
	// At is when the pass began.
	At time.Time `json:"at"`
	// DurationMS is how long it took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Recovered are the runs whose lease it found expired, as the pass
	// left them.
	Recovered []SweepRecovery `json:"recovered"`
}

// SweepRecovery is one run a sweep pass recovered.
type SweepRecovery struct {
	RunID        string `json:"run_id"`
	WorkspaceID  string `json:"workspace_id"`
	Env          string `json:"env"`
	WorkflowName string `json:"workflow_name"`
	// Outcome is SweepRequeued (queued again for its next attempt),
	// SweepHeld (interrupted, waiting for an operator: recovery mode
	// manual) or SweepDeadLettered (out of attempts: failed).
	Outcome string `json:"outcome" enum:"requeued,held,dead_lettered"`
	// StatusAfter and ClaimStateAfter are the run's status and claim
	// state after the pass; Attempt its attempt then (a re-queued run's
	// next one).
	StatusAfter     starflowtype.RunStatus  `json:"status_after"`
	ClaimStateAfter starflowtype.ClaimState `json:"claim_state_after"`
	Attempt         int                     `json:"attempt"`
	DeadLettered    bool                    `json:"dead_lettered"`
}

// Outcomes of SweepRecovery.
const (
	SweepRequeued     = "requeued"
	SweepHeld         = "held"
	SweepDeadLettered = "dead_lettered"
)

// Sweeps reports what this process's lease sweeps did lately: the on-demand
// passes of Sweep and, while this engine leads maintenance, the periodic
// ones. The answer is a copy.
func (e *Engine) Sweeps() SweepHistory { return e.sweeps.history() }

// sweepLog records an engine's sweep passes (SweepHistory).
type sweepLog struct {
	mu       sync.Mutex
	last     time.Time
	lastTook time.Duration
	lastErr  bool
	passes   []SweepPass // oldest first, at most SweepPassesKept
}

// record is the sweeps' OnPass.
func (l *sweepLog) record(began time.Time, took time.Duration, changed []*starflowtype.Run, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.lastTook, l.lastErr = began, took, err != nil
	if len(changed) == 0 {
		return
	}
	p := SweepPass{At: began.UTC(), DurationMS: took.Milliseconds(), Recovered: make([]SweepRecovery, 0, len(changed))}
	for _, r := range changed {
		outcome := SweepHeld
		switch {
		case r.DeadLettered || r.Status == starflowtype.RunFailed:
			outcome = SweepDeadLettered
		case r.ClaimState == starflowtype.ClaimQueued:
			outcome = SweepRequeued
		}
		p.Recovered = append(p.Recovered, SweepRecovery{RunID: r.ID, WorkspaceID: r.WorkspaceID, Env: r.Env,
			WorkflowName: r.WorkflowName, Outcome: outcome, StatusAfter: r.Status, ClaimStateAfter: r.ClaimState,
			Attempt: r.Attempt, DeadLettered: r.DeadLettered})
	}
	l.passes = append(l.passes, p)
	if n := len(l.passes) - SweepPassesKept; n > 0 {
		l.passes = slices.Delete(l.passes, 0, n)
	}
}

// history is a copy of the log, newest pass first.
func (l *sweepLog) history() SweepHistory {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := SweepHistory{LastPassAt: l.last.UTC(), LastPassDurationMS: l.lastTook.Milliseconds(), Passes: make([]SweepPass, 0, len(l.passes))}
	if l.last.IsZero() {
		h.LastPassAt = time.Time{}
	}
	if l.lastErr {
		h.LastPassError = SweepPassFailed
	}
	for i := len(l.passes) - 1; i >= 0; i-- {
		p := l.passes[i]
		p.Recovered = slices.Clone(p.Recovered)
		h.Passes = append(h.Passes, p)
	}
	return h
}
