package starflowtype

import (
	"slices"
	"time"
)

// StuckReason says why a run that has not ended is not moving on its own
// (issue 13, "why is it stuck?"). The names are a contract: the HTTP API,
// the CLI, the dashboard and the metric label starflow_runs_stuck{reason}
// use them as they are.
type StuckReason string

// The reasons, one per kind of waiting. A run holding a fresh lease and
// not waiting between two tries of a step has none: it is running.
const (
	// StuckWaitingSignal: paused at a wait for a signal (Detail.Signal).
	StuckWaitingSignal StuckReason = "waiting_signal"
	// StuckWaitingTimer: paused at a timer (Detail.Until), or enqueued
	// with a delay and not claimable before Detail.Until.
	StuckWaitingTimer StuckReason = "waiting_timer"
	// StuckWaitingApproval: paused at an approval (Detail.Signal is the
	// signal that approves it).
	StuckWaitingApproval StuckReason = "waiting_approval"
	// StuckWaitingChild: paused at a workflow_call until its child run
	// (Detail.ChildRunID) ends; Detail.Child is the child's own reason.
	StuckWaitingChild StuckReason = "waiting_child"
	// StuckWaitingJob: paused at a job step until a remote worker ends
	// its job (Detail.JobType; Detail.Message says when no worker polled
	// for that type within the last minute).
	StuckWaitingJob StuckReason = "waiting_job"
	// StuckRetryBackoff: waiting out a retry backoff — of one step between
	// two tries (Detail.StepID, Detail.ScopePath, Detail.Try) while the
	// runner holds the run, or of the whole run between two attempts
	// (status interrupted, claim_state queued) — until Detail.NextAt.
	StuckRetryBackoff StuckReason = "retry_backoff"
	// StuckQueuedNoRunner: claimable, but no live runner serves its
	// workspace and pool (Detail.Pool; "" is a run any runner takes).
	StuckQueuedNoRunner StuckReason = "queued_no_runner"
	// StuckQueuedBehind: claimable, live runners serve it, and it waits
	// for its turn: Detail.Position in its queue, Detail.OldestAhead the
	// run first in line.
	StuckQueuedBehind StuckReason = "queued_behind"
	// StuckLeaseStale: a runner holds it, but the lease ran out (no
	// heartbeat within the lease TTL): the runner is probably gone and
	// the lease sweep will interrupt the run (Detail.Runner,
	// Detail.LastHeartbeat).
	StuckLeaseStale StuckReason = "lease_stale"
	// StuckInterrupted: interrupted and held for an operator (recovery
	// mode manual): Detail.Cause (runner_lost, or the failure),
	// Detail.AttemptsLeft, Detail.Mode.
	StuckInterrupted StuckReason = "interrupted"
	// StuckCancelRequested: an operator asked to cancel it while a step
	// was in flight; the runner stops at the next step boundary
	// (Detail.StepID, Detail.ScopePath: the step in flight).
	StuckCancelRequested StuckReason = "cancel_requested"
)

// StuckReasons returns every reason, in the order above (a new slice).
func StuckReasons() []StuckReason {
	return []StuckReason{StuckWaitingSignal, StuckWaitingTimer, StuckWaitingApproval, StuckWaitingChild, StuckWaitingJob,
		StuckRetryBackoff, StuckQueuedNoRunner, StuckQueuedBehind, StuckLeaseStale, StuckInterrupted,
		StuckCancelRequested}
}

// Valid reports whether r is one of the reasons.
func (r StuckReason) Valid() bool { return slices.Contains(StuckReasons(), r) }

// Stuck is the one typed reason of a run that has not ended (JSON
// {"reason", "since", "detail"}), computed from the cold store. Since is
// when the run entered this state (database clock, UTC): the wait's
// creation, the lease's expiry, the moment it became claimable, the
// cancel request, the failed try or attempt.
type Stuck struct {
	Reason StuckReason `json:"reason" enum:"waiting_signal,waiting_timer,waiting_approval,waiting_child,retry_backoff,queued_no_runner,queued_behind,lease_stale,interrupted,cancel_requested"`
	Since  time.Time   `json:"since"`
	Detail StuckDetail `json:"detail"`
}

// StuckDetail is what a reason adds: Message, a sentence for people, and
// the fields of that reason (the others are left out of the JSON). Times
// are UTC, database clock.
type StuckDetail struct {
	// Message says it in a sentence, e.g. "waiting for signal approve
	// since 2026-01-02 15:04:05Z".
	Message string `json:"message"`
	// Signal: the signal a waiting_signal or waiting_approval wait wakes on.
	Signal string `json:"signal,omitempty"`
	// JobType: the job type a waiting_job step waits for a worker of.
	JobType string `json:"job_type,omitempty"`
	// StepID and ScopePath: the step instance that waits, retries, or is
	// in flight (cancel_requested).
	StepID    string `json:"step_id,omitempty"`
	ScopePath string `json:"scope_path,omitempty"`
	// Until: when a timer fires (waiting_timer), or when a delayed run
	// becomes claimable.
	Until time.Time `json:"until,omitzero"`
	// ExpiresAt: when the wait times out (a wait's timeout), if it has one.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// ChildRunID and Child: the child run a waiting_child wait waits for,
	// and its own reason (nil when it is running, has ended, or lies
	// deeper than StuckChildDepth).
	ChildRunID string `json:"child_run_id,omitempty"`
	Child      *Stuck `json:"child,omitempty"`
	// Attempt: the run's attempt (retry_backoff: the attempt a run-level
	// retry will be; interrupted: the attempt that was interrupted).
	Attempt int `json:"attempt,omitempty"`
	// Try: the step's try that comes next (a step-level retry_backoff).
	Try int `json:"try,omitempty"`
	// NextAt: when the retry is due (retry_backoff).
	NextAt time.Time `json:"next_at,omitzero"`
	// Pool: the run's runner pool (queued_*; "" = any runner).
	Pool string `json:"pool,omitempty"`
	// Position: the run's place in its queue, 1 = next to be claimed
	// (queued_behind). The queue is the claimable runs of its workspace,
	// env and pool in claim order; a value of QueuePositionMax + 1 means
	// "further back than QueuePositionMax".
	Position int `json:"position,omitempty"`
	// OldestAhead: the run first in line in that queue (queued_behind;
	// "" when the run is first).
	OldestAhead string `json:"oldest_ahead,omitempty"`
	// Runner and LastHeartbeat: the runner holding the lease and its last
	// renewal (lease_stale, cancel_requested).
	Runner        string    `json:"runner,omitempty"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	// Cause: why an interrupted run stopped: runner_lost, or the error of
	// its retryable failure (interrupted).
	Cause string `json:"cause,omitempty"`
	// AttemptsLeft: attempts the run has left (interrupted: what a resume
	// would still allow before it is dead-lettered).
	AttemptsLeft int `json:"attempts_left,omitempty"`
	// Mode: the run's recovery mode (interrupted: manual, which is why it
	// is not recovered automatically).
	Mode RecoveryMode `json:"mode,omitempty"`
}

// QueuePositionMax is the deepest queue position counted exactly; a run
// further back reports QueuePositionMax + 1.
const QueuePositionMax = 1000

// StuckChildDepth bounds how many levels of child runs a waiting_child
// reason nests (Detail.Child).
const StuckChildDepth = 4

// Runner is a row of workflow_runners: a runner process (or an engine's
// in-process runner) as it last reported itself, on each heartbeat tick.
// A runner is live while ExpiresAt (LastSeen plus its lease TTL, database
// clock) has not passed.
type Runner struct {
	ID string `json:"id"`
	// WorkspaceID is the workspace it claims from; "" = every workspace.
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Pools are the runner pools it serves besides runs with no pool
	// (which every runner serves); empty = only those.
	Pools []string `json:"pools"`
	// OnlyRun, when set, is the one run (and its child runs) it executes
	// (`starflow run FILE`); such a runner serves no queue.
	OnlyRun string `json:"only_run,omitempty"`
	// Concurrency is the most runs it executes at once; RunsHeld how many
	// it held at LastSeen.
	Concurrency int       `json:"concurrency"`
	RunsHeld    int       `json:"runs_held"`
	StartedAt   time.Time `json:"started_at"`
	LastSeen    time.Time `json:"last_seen"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// Serves reports whether the runner claims runs of workspace and pool
// ("" = a run with no pool): the workspace it claims from, and a pool it
// serves or none. A runner limited to one run (OnlyRun) serves no queue.
func (r *Runner) Serves(workspace, pool string) bool {
	if r.OnlyRun != "" || (r.WorkspaceID != "" && r.WorkspaceID != workspace) {
		return false
	}
	return pool == "" || slices.Contains(r.Pools, pool)
}
