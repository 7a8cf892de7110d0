package state

import (
	"context"
	"encoding/json"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// DefaultWorkspace is the workspace_id used when none is given.
const DefaultWorkspace = "default"

// DefaultEnv is the env used when none is given.
const DefaultEnv = "prod"

// Adapter is the cold-tier store. Every method is one transaction. Methods
// whose params carry a Lease are runner writes: they are fenced by a
// conditional write on workflow_runs(id, leased_by, lease_epoch) inside the
// same transaction and return starflowtype.ErrLeaseLost (having written
// nothing) when it matches no row.
//
// Implementations: sqlitestore (embedded), nullstore (no-op). Every
// implementation passes state/statetest.
type Adapter interface {
	// Capabilities describes what the adapter can do (the conformance suite
	// skips durability cases for non-durable adapters).
	Capabilities() Capabilities

	// Migrate brings the schema to the newest version. Idempotent.
	Migrate(ctx context.Context) error
	// Close releases connections.
	Close() error

	// PutDefinition stores a definition revision; storing the same
	// (workspace, name, revision) again returns the existing row. Either
	// way the revision becomes the newest applied one (the "current"
	// revision GetDefinition returns by name), as re-deploying an older
	// revision should.
	PutDefinition(ctx context.Context, p *PutDefinitionParams) (*starflowtype.Definition, error)
	// GetDefinition finds a definition by ID, or by Name (+ Revision; the
	// most recently applied when Revision is empty). ErrNotFound when none
	// matches.
	GetDefinition(ctx context.Context, p *GetDefinitionParams) (*starflowtype.Definition, error)

	// EnqueueRun inserts a queued run and its run_queued event. With an
	// IdempotencyKey it first writes an idempotency_receipts row in the same
	// transaction: when an unexpired receipt for (workspace, key) exists, no
	// run is inserted and the receipt's run is returned instead (its ID then
	// differs from p.ID), so concurrent duplicates yield exactly one run.
	EnqueueRun(ctx context.Context, p *EnqueueRunParams) (*starflowtype.Run, error)
	// ClaimRun atomically claims the best available run (highest priority,
	// then oldest available_at) whose pool matches: claim_state → claimed,
	// leased_by, lease_until = db now + TTL, lease_epoch + 1,
	// claim_attempts + 1, and a run_claimed event. The seed's writeLease
	// moment. Returns (nil, nil) when nothing is claimable. p.Limit is
	// ignored (one run).
	ClaimRun(ctx context.Context, p *ClaimRunParams) (*starflowtype.Run, error)
	// ClaimRuns is ClaimRun of up to p.Limit runs (default 1) in one
	// statement, each with its run_claimed event, returned in claim order
	// (empty when nothing is claimable): a runner with several free slots
	// fills them at once. With p.RunID it claims at most one.
	ClaimRuns(ctx context.Context, p *ClaimRunParams) ([]*starflowtype.Run, error)

	// OnRunStart is the runner's first fenced write: status running,
	// claim_state running, started_at (first time), run_started event.
	OnRunStart(ctx context.Context, p *RunStartParams) (*starflowtype.Run, error)
	// RefreshLease extends the lease to db now + TTL and sets
	// last_heartbeat. Returns the new lease_until.
	RefreshLease(ctx context.Context, p *RefreshLeaseParams) (time.Time, error)
	// OnNodeStart starts try p.Try of a step instance: it upserts the step
	// row as running (tries = p.Try) and appends node_start with payload
	// {"try": p.Try}. A try is started once: when the row already
	// succeeded in this attempt, or its tries is p.Try or more, it writes
	// nothing and returns ErrConflict (so a continued try is the row's
	// tries + 1, never a second node_start of the same try). When an
	// operator asked to cancel the run it writes nothing and returns
	// starflowtype.ErrCancelRequested: the step boundary at which a running
	// run stops.
	OnNodeStart(ctx context.Context, p *NodeStartParams) error
	// OnNodeRetry records a failed try that will be retried: the step row
	// keeps status running with its error, and node_retry is appended.
	OnNodeRetry(ctx context.Context, p *NodeRetryParams) error
	// OnNodeComplete is a step's completion in one transaction: the step row
	// becomes succeeded, node_complete is appended and the checkpoint row is
	// written. With p.WithStart it is also the step's start (a step without
	// external side effects, whose start needs no write of its own): the
	// try is started as OnNodeStart would (node_start first, ErrConflict and
	// ErrCancelRequested alike) and completed in the same transaction.
	OnNodeComplete(ctx context.Context, p *NodeCompleteParams) error
	// OnNodeError records a terminal step failure: step row failed (or
	// cancelled, with p.Cancelled), node_error appended. A cancelled row
	// is like a failed one to every later write: a later try starts it
	// again (OnNodeStart with a higher try), as it does a failed row.
	OnNodeError(ctx context.Context, p *NodeErrorParams) error
	// OnNodeSkipped records a step whose `when` was false (or whose
	// dependency failed): step row skipped, node_skipped appended. No
	// checkpoint. A step instance already skipped in the same attempt (the
	// run continued after a durable wait or a graceful release and
	// re-evaluated the step) is left as it is: nothing is written, no event
	// is appended, no hook runs, and it returns nil. A succeeded step
	// instance returns ErrConflict.
	OnNodeSkipped(ctx context.Context, p *NodeSkippedParams) error
	// RecordPhaseIfChanged sets workflow_runs.phase and appends a phase event
	// when the phase differs from the stored one.
	RecordPhaseIfChanged(ctx context.Context, p *RecordPhaseParams) error
	// OnRunComplete ends a run as succeeded: output, completed_at,
	// duration_ms, claim_state complete, lease cleared, checkpoint_json
	// cleared, run_succeeded event.
	OnRunComplete(ctx context.Context, p *RunCompleteParams) (*starflowtype.Run, error)
	// OnRunError ends the current attempt with an error. When p.Retry is set
	// and attempt < max_attempts the run is re-queued (status interrupted,
	// claim_state queued, attempt + 1, available_at = db now + p.Backoff,
	// run_interrupted event); otherwise it fails (status failed, claim_state
	// failed, dead_lettered when attempts ran out, run_failed and, when
	// dead-lettered, run_dead_lettered). The lease is cleared either way.
	// Each of the three writes p.Error to error and p.ErrorJSON to
	// error_json (NULL when nil); a child's end carries both to its
	// parent (ChildPayload). Every write that clears error (a new
	// attempt's OnRunStart, OnRunComplete, RequeueRun) clears error_json,
	// and one that writes an error of its own (the sweep) writes none.
	OnRunError(ctx context.Context, p *RunErrorParams) (*starflowtype.Run, error)
	// OnRunCancelled ends a run whose cancellation was requested: status
	// cancelled, claim_state complete, lease cleared, step rows left
	// running become cancelled, run_cancelled event.
	OnRunCancelled(ctx context.Context, p *RunCancelledParams) (*starflowtype.Run, error)
	// ClearLease releases a lease without ending the run (graceful stop):
	// claim_state queued, available now, leased_by/lease_until cleared; the
	// next claim bumps the epoch.
	ClearLease(ctx context.Context, p *ClearLeaseParams) error

	// ExpireOldLeases is the lease sweep (seed 000's expireOldLeases): every
	// run whose claim_state is claimed or running and whose lease_until is
	// before the database's now becomes interrupted/abandoned with a
	// runner_lost event; the step instances it left running in that
	// attempt become failed with the reason as their error; and then the
	// retry policy applies: recovery mode
	// replay or resume with attempt < max_attempts re-queues it (claim_state
	// queued, attempt + 1, available_at = now + p.Backoff(attempt),
	// run_interrupted event); manual leaves it interrupted for an operator;
	// exhausted attempts fail it dead-lettered (run_failed,
	// run_dead_lettered). Runs locked by another transaction are skipped
	// (they are swept next time). Paused runs hold no lease and are never
	// touched. Returns the runs it changed, as written.
	ExpireOldLeases(ctx context.Context, p *ExpireOldLeasesParams) ([]*starflowtype.Run, error)

	// CancelRun is an operator's cancel. A run that is queued, interrupted
	// or paused becomes cancelled at once (run_cancelled event); a claimed
	// or running run gets cancel_requested and its runner stops at the
	// next step boundary. Its non-terminal descendants are cancelled the
	// same way in the same transaction, however deep the tree (a runaway
	// recursion of workflow_calls included). ErrConflict when the run
	// already ended; ErrNotFound when it does not exist.
	CancelRun(ctx context.Context, p *CancelRunParams) (*starflowtype.Run, error)
	// RequeueRun is an operator's resume or retrigger: a run that is not
	// claimed or running (interrupted, failed, cancelled; succeeded too for
	// a retrigger) is queued again as a new attempt (attempt + 1, available
	// now, error and dead_lettered cleared, max_attempts raised to at least
	// the new attempt), with the given recovery mode and, when set, onto
	// another definition revision; run_queued event with the reason.
	// ErrConflict when the run is claimed or running (or, for a resume,
	// succeeded); ErrNotFound when it does not exist.
	RequeueRun(ctx context.Context, p *RequeueRunParams) (*starflowtype.Run, error)

	// GetRun reads one run. ErrNotFound when absent.
	GetRun(ctx context.Context, p *GetRunParams) (*starflowtype.Run, error)
	// ListRuns lists runs, newest first: ordered by (created_at, id)
	// descending, so ListRunsParams.After pages through them.
	ListRuns(ctx context.Context, p *ListRunsParams) ([]*starflowtype.Run, error)
	// ListSteps lists a run's step rows in start order.
	ListSteps(ctx context.Context, p *ListStepsParams) ([]*starflowtype.Step, error)
	// ListEvents lists a run's events in id order.
	ListEvents(ctx context.Context, p *ListEventsParams) ([]*starflowtype.Event, error)
	// ListCheckpoints lists a run's checkpoints in creation order.
	ListCheckpoints(ctx context.Context, p *ListCheckpointsParams) ([]*starflowtype.Checkpoint, error)

	// Waiter: durable waits, wakes, session variables, wake keys.
	Waiter
	// Operator: API keys, definition listings, id prefixes, operator
	// session variables.
	Operator
	// Watchdog: live runners, stuck classes, queue heads, stuck counts.
	Watchdog
	// Jobs: remote workers' jobs (worker_jobs).
	Jobs
	// Webhooks: which workflows take signed webhook deliveries, under
	// which generation of their (derived, never stored) secret.
	Webhooks
	// Schedules: workflow schedules, their pause, the scheduler's reads
	// and its one write per tick.
	Schedules
	// Retention: removing what is older than the configured ages.
	Retention
}

// Capabilities are the optional abilities of an adapter.
type Capabilities struct {
	// Durable: writes survive a process crash (false for nullstore).
	Durable bool
	// Dialect names the SQL dialect ("sqlite", "postgres"), or "" when the
	// adapter is not SQL.
	Dialect string
	// WakeKeyFile is the wake-token key file that belongs with this
	// store's data (PATH.wakekeys beside a SQLite database), used when no
	// key ring is configured; "" when the store has none (PostgreSQL:
	// processes on many machines must be given the same keys).
	WakeKeyFile string
}

// PutDefinitionParams stores one definition revision.
type PutDefinitionParams struct {
	WorkspaceID string
	Name        string
	Revision    string          // sha256 hex of Spec
	Spec        json.RawMessage // canonical JSON
	Source      string          // the text as written
	// Env is the env of the runs the revision's schedules start (the
	// applier's). Default DefaultEnv.
	Env string
	// Schedules are the revision's schedules, in definition order. In
	// the same transaction, the revision becoming current replaces the
	// workflow's workflow_schedules rows with these: a schedule whose
	// index, cron and timezone are unchanged keeps its state (last tick,
	// next fire time, last run), the others start anew, anchored at the
	// database's now; rows beyond the list are removed. The workflow's
	// pause is not touched.
	Schedules []ScheduleSpec
}

// GetDefinitionParams finds a definition by ID or by name (+ revision).
type GetDefinitionParams struct {
	WorkspaceID string
	ID          string
	Name        string
	Revision    string
}

// EnqueueRunParams inserts one queued run.
type EnqueueRunParams struct {
	ID               string // uuid; generated when empty
	WorkspaceID      string
	Env              string
	DefinitionID     string
	WorkflowName     string
	WorkflowRevision string
	RunnerPool       string // "" = any pool
	Priority         int
	MaxAttempts      int // default MaxAttemptsDefault
	Delay            time.Duration
	RecoveryMode     starflowtype.RecoveryMode
	TriggerType      starflowtype.TriggerType
	// ParentRunID makes the run a child of that run: its Depth is the
	// parent's + 1, read from the parent's row (1 when there is none).
	ParentRunID    string
	IdempotencyKey string
	// IdempotencyTTL is how long the receipt holds. Default
	// IdempotencyTTLDefault.
	IdempotencyTTL time.Duration
	// RequestHash identifies the request an IdempotencyKey answers (e.g.
	// the sha256 hex of the workflow and input), stored with the receipt:
	// a repeat whose RequestHash differs from the receipt's (both set)
	// writes nothing and returns ErrConflict.
	RequestHash string
	Input       json.RawMessage
	// QueuedPayload is the payload of the run_queued event (a JSON
	// object saying what created the run, e.g. a webhook delivery); nil:
	// none.
	QueuedPayload json.RawMessage
	// TraceID and TraceParent are the run's OpenTelemetry trace (32
	// lowercase hex digits) and the W3C traceparent of its enqueue span,
	// the parent of every execution's span (see starflowtype.Run); ""
	// stores NULL (tracing off).
	TraceID, TraceParent string
}

// MaxAttemptsDefault is a run's attempts when neither the enqueue nor
// its definition says.
const MaxAttemptsDefault = 3

// IdempotencyTTLDefault is how long an idempotency receipt holds.
const IdempotencyTTLDefault = 24 * time.Hour

// ExpireOldLeasesParams configures one sweep pass.
type ExpireOldLeasesParams struct {
	// Reason is the runs' error and the runner_lost payload's reason.
	// Default "runner_lost".
	Reason string
	// Backoff gives the delay before attempt+1 given the attempt that was
	// lost. Default: none (available at once).
	Backoff func(attempt int) time.Duration
	// Limit bounds the runs changed in one pass. Default 500.
	Limit int
}

// ClaimRunParams claims one run for RunnerID.
type ClaimRunParams struct {
	RunnerID    string
	Pools       []string // the runner's pools; a run with a NULL pool matches any
	LeaseTTL    time.Duration
	WorkspaceID string // "" = any workspace
	// RunID limits the claim to that run (when it is claimable); "" =
	// the best available run. `starflow run` uses it to execute only its
	// own run.
	RunID string
	// WithDescendants widens RunID to that run and every run descending
	// from it (parent_run_id chain, any depth), best first in claim
	// order: `starflow run` executes its run's child runs (workflow_call)
	// this way. Ignored without RunID.
	WithDescendants bool
	// Limit bounds the runs ClaimRuns claims. Default 1.
	Limit int
	// Start makes ClaimRuns also start each run it claims, in the same
	// transaction, as OnRunStart would (the runner's first fenced write,
	// made under the lease just taken): the runs come back running. A
	// runner that executes what it claims at once saves a transaction.
	Start bool
}

// RunStartParams is the first fenced write of a claim.
type RunStartParams struct {
	RunID string
	Lease starflowtype.Lease
}

// RefreshLeaseParams is one heartbeat.
type RefreshLeaseParams struct {
	RunID    string
	Lease    starflowtype.Lease
	LeaseTTL time.Duration
}

// StepKey names one step instance within one attempt.
type StepKey struct {
	RunID     string
	Attempt   int
	ScopePath string
	StepID    string
}

// NodeStartParams opens (or re-opens, for a retry or a continued try) a
// step row.
type NodeStartParams struct {
	StepKey
	Lease   starflowtype.Lease
	Kind    string
	Try     int             // 1-based; above the row's tries (tries count every start in the attempt)
	Payload json.RawMessage // node_start payload (e.g. rendered input), may be nil
}

// NodeRetryParams records a failed try that will be retried.
type NodeRetryParams struct {
	StepKey
	Lease   starflowtype.Lease
	Try     int
	Error   string
	Backoff time.Duration
}

// NodeCompleteParams completes a step: ledger row, event and checkpoint.
type NodeCompleteParams struct {
	StepKey
	Lease   starflowtype.Lease
	Try     int
	Output  json.RawMessage // the step's output (stored in the checkpoint)
	Context json.RawMessage // the context keys the step changed (delta)
	// WithStart writes the try's start in the same transaction (see
	// Adapter.OnNodeComplete); Kind is then the step's kind.
	WithStart bool
	Kind      string
}

// NodeErrorParams records a terminal step failure.
type NodeErrorParams struct {
	StepKey
	Lease starflowtype.Lease
	Kind  string
	Try   int
	Error string
	// Cancelled records the step instance as cancelled (a lane that lost
	// a race, a sibling of a failed fail_fast lane) instead of failed:
	// status cancelled, finished_at and duration_ms as for a failure, and
	// still a node_error event, whose default payload then also holds
	// "cancelled": true.
	Cancelled bool
	// Payload is the node_error payload; nil = {"try", "error"} (and
	// "cancelled"). A payload given is written as it is.
	Payload json.RawMessage
}

// NodeSkippedParams records a skipped step.
type NodeSkippedParams struct {
	StepKey
	Lease  starflowtype.Lease
	Kind   string
	Reason string
}

// RecordPhaseParams records a phase change.
type RecordPhaseParams struct {
	RunID string
	Lease starflowtype.Lease
	Phase string
}

// RunCompleteParams ends a run as succeeded.
type RunCompleteParams struct {
	RunID  string
	Lease  starflowtype.Lease
	Output json.RawMessage
}

// RunErrorParams ends the current attempt with an error.
type RunErrorParams struct {
	RunID string
	Lease starflowtype.Lease
	Error string // the message (workflow_runs.error)
	// ErrorJSON is the typed error object (a starflowtype.ErrorInfo's
	// JSON), already scrubbed by the caller, stored as error_json and
	// read back as Run.ErrorDetail; nil (or JSON null) = none. Anything
	// else must be a JSON object, or nothing is written.
	ErrorJSON json.RawMessage
	Retry     bool          // the failure is retryable (transient)
	Backoff   time.Duration // delay before the next attempt when re-queued
}

// RunCancelledParams ends a run whose cancellation was requested.
type RunCancelledParams struct {
	RunID string
	Lease starflowtype.Lease
}

// CancelRunParams is an operator's cancel.
type CancelRunParams struct {
	WorkspaceID string // "" = any
	RunID       string
}

// RequeueRunParams is an operator's resume or retrigger.
type RequeueRunParams struct {
	WorkspaceID string // "" = any
	RunID       string
	// Reason is "resume" or "retrigger" (recorded in the run_queued event).
	Reason string
	// RecoveryMode is the mode of the new attempt ("" = keep the run's).
	RecoveryMode starflowtype.RecoveryMode
	// DefinitionID and WorkflowRevision move the run onto another
	// revision ("" = keep the pinned one).
	DefinitionID     string
	WorkflowRevision string
}

// ClearLeaseParams releases a lease without ending the run.
type ClearLeaseParams struct {
	RunID string
	Lease starflowtype.Lease
}

// GetRunParams reads one run.
type GetRunParams struct {
	WorkspaceID string // "" = any
	ID          string
}

// ListRunsParams filters a run listing. Zero values mean "any".
type ListRunsParams struct {
	WorkspaceID  string
	Env          string
	WorkflowName string
	Status       []starflowtype.RunStatus
	// ParentRunID: only the child runs of this run.
	ParentRunID string
	// StaleBefore: only running runs whose last heartbeat (their start
	// when none was sent yet) is before this instant.
	StaleBefore time.Time
	// CreatedAfter / CreatedBefore: only runs created at or after / before
	// these instants.
	CreatedAfter, CreatedBefore time.Time
	// DeadLettered: only dead-lettered runs.
	DeadLettered bool
	// After: only runs after this position of the listing's order
	// (created_at, id descending): the next page.
	After *RunCursor
	Limit int // default 50
}

// ListStepsParams lists a run's steps; Attempt 0 means every attempt.
type ListStepsParams struct {
	RunID   string
	Attempt int
}

// ListEventsParams lists a run's events after AfterID.
type ListEventsParams struct {
	RunID   string
	AfterID int64
	Limit   int // 0 = all
}

// ListCheckpointsParams lists a run's checkpoints; Attempt 0 = every attempt.
type ListCheckpointsParams struct {
	RunID   string
	Attempt int
}
