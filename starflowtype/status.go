package starflowtype

// RunStatus is workflow_runs.status (SPEC §3).
type RunStatus string

// Run statuses. Terminal ones are succeeded, failed and cancelled;
// interrupted is not terminal (it is re-queued by retry or an operator).
const (
	RunQueued      RunStatus = "queued"
	RunRunning     RunStatus = "running"
	RunPaused      RunStatus = "paused"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunInterrupted RunStatus = "interrupted"
	RunCancelled   RunStatus = "cancelled"
)

// RunStatuses returns every run status, in lifecycle order (a new slice).
func RunStatuses() []RunStatus {
	return []RunStatus{RunQueued, RunRunning, RunPaused, RunSucceeded, RunFailed, RunInterrupted, RunCancelled}
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunPaused, RunSucceeded, RunFailed, RunInterrupted, RunCancelled:
		return true
	}
	return false
}

// Terminal reports whether no further transition is possible without an
// operator re-driving the run.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// ClaimState is workflow_runs.claim_state, the lease state machine of
// SPEC §3: queued → claimed → running → complete | failed, running → parked
// → queued, running → abandoned → queued | failed.
type ClaimState string

// Claim states.
const (
	ClaimQueued    ClaimState = "queued"
	ClaimClaimed   ClaimState = "claimed"
	ClaimRunning   ClaimState = "running"
	ClaimParked    ClaimState = "parked"
	ClaimComplete  ClaimState = "complete"
	ClaimFailed    ClaimState = "failed"
	ClaimAbandoned ClaimState = "abandoned"
)

// StepStatus is workflow_steps.status.
type StepStatus string

// Step statuses.
const (
	StepRunning   StepStatus = "running"
	StepWaiting   StepStatus = "waiting"
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
)

// EventType is workflow_run_events.event_type (Appendix A).
type EventType string

// Event types. EventNodeProgress is warm-tier only and never stored cold.
// EventLeaseLost is in the spec's list but no writer records it: a run's
// lease is only ever taken from its runner by the lease sweep, which
// records the loss as EventRunnerLost (with the runner and the epoch),
// and the runner that finds out afterwards (a refused renewal or fenced
// write, its own self-stop deadline) writes nothing more for the run
// (docs/decisions.md 250).
const (
	EventRunQueued       EventType = "run_queued"
	EventRunClaimed      EventType = "run_claimed"
	EventRunStarted      EventType = "run_started"
	EventNodeStart       EventType = "node_start"
	EventNodeRetry       EventType = "node_retry"
	EventNodeComplete    EventType = "node_complete"
	EventNodeError       EventType = "node_error"
	EventNodeSkipped     EventType = "node_skipped"
	EventNodeProgress    EventType = "node_progress"
	EventRunPaused       EventType = "run_paused"
	EventRunResumed      EventType = "run_resumed"
	EventWakeReceived    EventType = "wake_received"
	EventPhase           EventType = "phase"
	EventRunnerLost      EventType = "runner_lost"
	EventLeaseLost       EventType = "lease_lost"
	EventRunInterrupted  EventType = "run_interrupted"
	EventRunSucceeded    EventType = "run_succeeded"
	EventRunFailed       EventType = "run_failed"
	EventRunCancelled    EventType = "run_cancelled"
	EventRunDeadLettered EventType = "run_dead_lettered"
)

// RecoveryMode says what happens to a run after runner loss or a retryable
// failure (SPEC §3).
type RecoveryMode string

// Recovery modes; RecoveryReplay is the default.
const (
	RecoveryReplay RecoveryMode = "replay"
	RecoveryResume RecoveryMode = "resume"
	RecoveryManual RecoveryMode = "manual"
)

// Valid reports whether m is one of the three modes.
func (m RecoveryMode) Valid() bool {
	return m == RecoveryReplay || m == RecoveryResume || m == RecoveryManual
}

// TriggerType is workflow_runs.trigger_type.
type TriggerType string

// Trigger types.
const (
	TriggerCLI       TriggerType = "cli"
	TriggerAPI       TriggerType = "api"
	TriggerSchedule  TriggerType = "schedule"
	TriggerChild     TriggerType = "child"
	TriggerDashboard TriggerType = "dashboard"
)
