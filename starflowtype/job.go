package starflowtype

import (
	"encoding/json"
	"time"
)

// JobStatus is the state of a worker_jobs row (issue 15).
type JobStatus string

// Job statuses. A job is queued until a worker claims it, running while a
// worker holds its lease, and ends succeeded, failed, or cancelled (its
// wait closed without it: the run ended, the attempt was interrupted, the
// job's timeout passed).
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
)

// JobSignal, then ":" and the job type, is the signal of a job step's
// wait (workflow_waits.signal; correlation_key names the step instance):
// a completed job whose run was interrupted before it resumed goes back to
// the inbox under it, so the next attempt's job step takes the result
// instead of queueing the job again.
const JobSignal = "starflow.job"

// WorkerJob is one row of worker_jobs (SPEC appendix A): a `job` step
// instance handed to remote workers. ID is the id of the step's wait too.
// Tries counts claims (each claim is a try); MaxTries is the step's
// retry_policy.max_attempts. LeaseToken is the fencing token of the
// current claim (empty when none); HeartbeatTimeout is how long a claim
// or a heartbeat extends LeaseUntil.
type WorkerJob struct {
	ID               string          `json:"id"`
	WorkspaceID      string          `json:"workspace_id"`
	RunID            string          `json:"run_id"`
	Attempt          int             `json:"attempt"`
	ScopePath        string          `json:"scope_path"`
	StepID           string          `json:"step_id"`
	Type             string          `json:"type"` // worker_jobs.step_type
	Status           JobStatus       `json:"status"`
	LeasedBy         string          `json:"leased_by,omitempty"`
	LeaseUntil       time.Time       `json:"lease_until,omitzero"`
	LeaseEpoch       int             `json:"lease_epoch"`
	LeaseToken       string          `json:"-"`
	Tries            int             `json:"tries"`
	MaxTries         int             `json:"max_tries"`
	HeartbeatTimeout time.Duration   `json:"heartbeat_timeout"`
	Retry            json.RawMessage `json:"-"` // worker_jobs.retry_json
	AvailableAt      time.Time       `json:"available_at"`
	IdempotencyKey   string          `json:"idempotency_key"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	Error            string          `json:"error,omitempty"`
	ErrorDetail      json.RawMessage `json:"error_detail,omitempty"` // worker_jobs.error_json
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

// JobPoller is a worker that polled for a job type (worker_job_pollers).
type JobPoller struct {
	WorkspaceID string    `json:"workspace_id"`
	Type        string    `json:"type"`
	Worker      string    `json:"worker"`
	LastPollAt  time.Time `json:"last_poll_at"`
}
