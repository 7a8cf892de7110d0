package api

import (
	"encoding/json"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// The remote-worker protocol (issue 15, SPEC §9): a `job` step becomes a
// worker_jobs row, and external processes serve its type over HTTP. A
// worker polls (POST /api/jobs/poll) and gets one job claimed with a
// lease; it heartbeats (POST /api/jobs/{id}/heartbeat) to keep the lease,
// then completes or fails it. Every call after the poll carries the
// claim's fencing token: a token of an older claim (the lease expired and
// the job was claimed again) gets 409 and changes nothing. docs/api.md
// describes the protocol with curl examples.

// Bounds of the protocol's requests.
const (
	// JobPollWaitMax is the longest long-poll, in seconds.
	JobPollWaitMax = 30
	// JobPollTypesMax is how many job types one poll may name.
	JobPollTypesMax = 50
	// JobMessageMax is the longest heartbeat message, in bytes.
	JobMessageMax = 1000
)

// JobPollRequest is the body of POST /api/jobs/poll.
type JobPollRequest struct {
	Types  []string `json:"types" minItems:"1" maxItems:"50" doc:"The job types this worker serves (step kind job: {type: NAME})."`
	Worker string   `json:"worker" minLength:"1" maxLength:"200" doc:"The worker's id, recorded as the job's leased_by (e.g. host:pid)."`
	WaitS  int      `json:"wait_s,omitempty" minimum:"0" maximum:"30" doc:"How long to wait for a job, in seconds (long-poll); 0 answers at once."`
}

// Job is a job claimed by a worker: what to do (Type, Input), where it
// comes from (RunID, Attempt, ScopePath, StepID), and the lease the worker
// holds on it (FencingToken, LeaseUntil, renewed by a heartbeat for
// HeartbeatTimeoutMS).
type Job struct {
	ID             string          `json:"id" doc:"The job's id (worker_jobs.id)."`
	Type           string          `json:"type" doc:"The job type (the step's job.type)."`
	Input          json.RawMessage `json:"input" doc:"The job's input: the step's job.input rendered, secrets masked."`
	RunID          string          `json:"run_id"`
	ScopePath      string          `json:"scope_path" doc:"The step instance's scope path (\"\" at top level)."`
	StepID         string          `json:"step_id"`
	Attempt        int             `json:"attempt" doc:"The run's attempt the job belongs to."`
	Tries          int             `json:"tries" doc:"This claim's try number, from 1; tries count against the step's retry_policy.max_attempts."`
	IdempotencyKey string          `json:"idempotency_key" doc:"The same for every try of this step instance of this run, across the run's attempts: deduplicate side effects with it."`
	FencingToken   string          `json:"fencing_token" doc:"Sent with every heartbeat, complete and fail of this claim; a later claim's token replaces it."`
	LeaseUntil     time.Time       `json:"lease_until" doc:"When the lease expires unless a heartbeat extends it."`
	// HeartbeatTimeoutMS is how long, in ms, each heartbeat extends the
	// lease (the step's job.heartbeat_timeout).
	HeartbeatTimeoutMS int64 `json:"heartbeat_timeout_ms" doc:"How long each heartbeat extends the lease, in ms."`
}

// JobHeartbeatRequest is the body of POST /api/jobs/{id}/heartbeat.
type JobHeartbeatRequest struct {
	FencingToken string   `json:"fencing_token" minLength:"1" maxLength:"200"`
	Progress     *float64 `json:"progress,omitempty" minimum:"0" maximum:"1" doc:"How far the job is, from 0 to 1 (shown live)."`
	Message      string   `json:"message,omitempty" maxLength:"1000" doc:"What the job is doing (shown live)."`
}

// JobHeartbeatResult answers a heartbeat.
type JobHeartbeatResult struct {
	LeaseUntil time.Time `json:"lease_until" doc:"The extended lease."`
}

// JobCompleteRequest is the body of POST /api/jobs/{id}/complete.
type JobCompleteRequest struct {
	FencingToken string          `json:"fencing_token" minLength:"1" maxLength:"200"`
	Output       json.RawMessage `json:"output,omitempty" doc:"The job's output: the step's output (null when absent)."`
}

// JobFailRequest is the body of POST /api/jobs/{id}/fail.
type JobFailRequest struct {
	FencingToken string                 `json:"fencing_token" minLength:"1" maxLength:"200"`
	Error        starflowtype.ErrorInfo `json:"error" doc:"The typed error: type (default error), message, details."`
	Retryable    bool                   `json:"retryable,omitempty" doc:"Whether another try may succeed; tried again only while the step's retry_policy allows."`
}

// JobResult answers complete and fail: the job's status after the call —
// succeeded, failed, or queued (a retryable failure to be tried again at
// RetryAt).
type JobResult struct {
	ID      string     `json:"id"`
	Status  string     `json:"status" enum:"succeeded,failed,queued"`
	RetryAt *time.Time `json:"retry_at,omitempty" doc:"When a queued job may be claimed again."`
}
