package state

import (
	"context"
	"encoding/json"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Jobs is the part of Adapter behind remote workers (issue 15, SPEC §9):
// the worker_jobs rows of `job` steps, claimed, heartbeated, completed and
// failed by worker processes over HTTP.
//
// A job is written by RegisterWait (RegisterWaitParams.Job) in the
// transaction that registers its step's wait (kind job, the same id), so
// a job exists exactly when its wait does; it is not written when the
// registration consumed the step's earlier result from the inbox. A job
// ends with its wait: CompleteJob and a final FailJob wake the wait in
// their transaction (payload JobPayload), and whatever closes the wait
// otherwise (the run's end, an interrupted attempt, the job's timeout)
// cancels the job in the same transaction.
//
// Fencing: ClaimJob bumps lease_epoch and issues a new LeaseToken; every
// later call names the job and the token, and is refused with
// starflowtype.ErrLeaseLost (writing nothing) when the token is not the
// current claim's, the job is not running, or its lease expired (the
// database's clock). Of concurrent calls with one token exactly one
// completes or fails the job.
//
// Lock order: writes that change a job and its run lock the run row first
// (as every wake does), then the job.
type Jobs interface {
	// ClaimJob claims the oldest queued job of p.WorkspaceID whose type is
	// one of p.Types and whose available_at has come: status running,
	// leased_by p.Worker, lease_until = now + its heartbeat timeout,
	// lease_epoch + 1, tries + 1, a new lease_token. Returns (nil, nil)
	// when none is claimable. With p.RecordPoll it also records the poll
	// (worker_job_pollers) for each type.
	ClaimJob(ctx context.Context, p *ClaimJobParams) (*starflowtype.WorkerJob, error)
	// HeartbeatJob extends the lease of a running job by its heartbeat
	// timeout and returns the job. ErrLeaseLost as above; ErrNotFound
	// when no job of the workspace has that id.
	HeartbeatJob(ctx context.Context, p *HeartbeatJobParams) (*starflowtype.WorkerJob, error)
	// CompleteJob ends a running job succeeded with p.Output and wakes its
	// wait (the run re-queued when parked), in one transaction.
	// ErrLeaseLost, ErrNotFound as above.
	CompleteJob(ctx context.Context, p *CompleteJobParams) (*starflowtype.WorkerJob, error)
	// FailJob records a failed try. With p.Retry and tries left (tries <
	// max_tries) the job is queued again, available after the step's
	// retry delay for that try; otherwise it ends failed and its wait is
	// woken with the error. ErrLeaseLost, ErrNotFound as above.
	FailJob(ctx context.Context, p *FailJobParams) (*starflowtype.WorkerJob, error)
	// GetJob reads one job (in p.WorkspaceID when set). ErrNotFound.
	GetJob(ctx context.Context, p *GetJobParams) (*starflowtype.WorkerJob, error)
	// ExpireJobLeases is the job sweep: each running job whose lease_until
	// passed is queued again (a try lost) when its retry policy tries an
	// expired lease again and tries remain, else ends failed with a
	// timeout error (its wait woken). One transaction per job. Returns the
	// jobs changed.
	ExpireJobLeases(ctx context.Context, p *ExpireJobLeasesParams) ([]*starflowtype.WorkerJob, error)
	// AbandonJob cancels the job of step instance p (fenced by the run's
	// lease) when it has not ended: the engine gave the step up (a try
	// caught a sibling's failure, its lane lost a race), so no worker
	// should do it. Its wait is left as it is. No job is no error.
	AbandonJob(ctx context.Context, p *AbandonJobParams) error
	// JobPollers lists who polled for p.Types in p.WorkspaceID within
	// p.Since of the database's now, newest first.
	JobPollers(ctx context.Context, p *JobPollersParams) ([]*starflowtype.JobPoller, error)
}

// JobSpec is the job a job step's RegisterWait writes.
type JobSpec struct {
	Type             string
	Input            json.RawMessage // scrubbed; nil = {}
	MaxTries         int             // ≥ 1
	HeartbeatTimeout time.Duration   // > 0
	Retry            JobRetry
	IdempotencyKey   string
}

// JobRetry is a job step's resolved retry policy, kept on the job
// (worker_jobs.retry_json) so that the server can delay a retried try and
// the sweep can decide about an expired lease without the definition.
type JobRetry struct {
	InitialMS int64   `json:"initial_ms"`
	MaxMS     int64   `json:"max_ms"`
	Backoff   float64 `json:"backoff"`
	Jitter    string  `json:"jitter,omitempty"` // workflow.Jitter*; "" = ±20 %
	// RetryOn is the step's retry_on expression (nil = the transient
	// set), evaluated over a worker's error when it fails the job.
	RetryOn any `json:"retry_on,omitempty"`
	// RetryExpired says whether an expired lease (a timeout error) is
	// tried again: retry_on evaluated when the job was written.
	RetryExpired bool `json:"retry_expired"`
}

// ClaimJobParams is one poll.
type ClaimJobParams struct {
	WorkspaceID string
	Env         string // only jobs of this env's runs; "" = every env
	Types       []string
	Worker      string
	// RecordPoll records the poll in worker_job_pollers (the first claim
	// of a long-poll; its later tries need not write it again).
	RecordPoll bool
}

// HeartbeatJobParams is one heartbeat.
type HeartbeatJobParams struct {
	WorkspaceID string // "" = any
	Env         string // "" = any
	ID          string
	Token       string
}

// CompleteJobParams completes a job.
type CompleteJobParams struct {
	WorkspaceID string // "" = any
	Env         string // "" = any
	ID          string
	Token       string
	Output      json.RawMessage // nil = null
}

// FailJobParams fails one try of a job.
type FailJobParams struct {
	WorkspaceID string // "" = any
	Env         string // "" = any
	ID          string
	Token       string
	// Error is the typed error (scrubbed by the caller); its Message is
	// stored as worker_jobs.error.
	Error starflowtype.ErrorInfo
	// Retry is the caller's decision that this failure may be tried again
	// (the worker said retryable and the step's retry_on holds); the store
	// still ends the job when no tries are left.
	Retry bool
}

// GetJobParams reads one job.
type GetJobParams struct {
	WorkspaceID string // "" = any
	Env         string // "" = any
	ID          string
}

// AbandonJobParams names the step instance whose job is given up.
type AbandonJobParams struct {
	StepKey
	Lease starflowtype.Lease
}

// ExpireJobLeasesParams bounds one job sweep.
type ExpireJobLeasesParams struct {
	Limit int // default 500
}

// JobPollersParams selects recent pollers.
type JobPollersParams struct {
	WorkspaceID string
	Types       []string
	Since       time.Duration // default 1 min
}

// JobPayload is the wake payload of a job step's wait: {"output": X} when
// the job succeeded, {"error": {type, message, details, …}} when it
// failed.
func JobPayload(output json.RawMessage, failure *starflowtype.ErrorInfo) json.RawMessage {
	if failure != nil {
		b, _ := json.Marshal(map[string]any{"error": failure})
		return b
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"output": output})
	return b
}
