package starflowtype

import (
	"encoding/json"
	"time"
)

// Lease identifies the runner allowed to write a run and the fencing epoch
// of its claim. Every runner write carries one; the cold store refuses a
// write whose (RunnerID, Epoch) no longer matches workflow_runs
// (leased_by, lease_epoch) with ErrLeaseLost.
type Lease struct {
	RunnerID string `json:"runner_id"`
	Epoch    int64  `json:"epoch"`
}

// Run is one row of workflow_runs. Times are UTC; a zero time means NULL.
// JSON fields hold the raw stored JSON (nil when NULL).
type Run struct {
	ID               string          `json:"id"`
	WorkspaceID      string          `json:"workspace_id"`
	Env              string          `json:"env"`
	DefinitionID     string          `json:"definition_id"`
	WorkflowName     string          `json:"workflow_name"`
	WorkflowRevision string          `json:"workflow_revision"`
	TemplateID       string          `json:"template_id"`
	Status           RunStatus       `json:"status"`
	ClaimState       ClaimState      `json:"claim_state"`
	RunnerPool       string          `json:"runner_pool,omitempty"`
	Priority         int             `json:"priority"`
	LeasedBy         string          `json:"leased_by,omitempty"`
	LeaseUntil       time.Time       `json:"lease_until,omitzero"`
	LeaseEpoch       int64           `json:"lease_epoch"`
	LastHeartbeat    time.Time       `json:"last_heartbeat,omitzero"`
	ClaimAttempts    int             `json:"claim_attempts"`
	Attempt          int             `json:"attempt"`
	MaxAttempts      int             `json:"max_attempts"`
	AvailableAt      time.Time       `json:"available_at,omitzero"`
	RecoveryMode     RecoveryMode    `json:"recovery_mode"`
	TriggerType      TriggerType     `json:"trigger_type"`
	ParentRunID      string          `json:"parent_run_id,omitempty"`
	IdempotencyKey   string          `json:"idempotency_key,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	Checkpoint       json.RawMessage `json:"checkpoint,omitempty"`
	Phase            string          `json:"phase,omitempty"`
	Error            string          `json:"error,omitempty"`
	// ErrorDetail is the run's error as a typed object (an ErrorInfo's
	// JSON, scrubbed; workflow_runs.error_json): written with Error by
	// OnRunError and cleared with it; nil when the error has none (a
	// runner lost by the sweep) or the run has no error. It is not part
	// of a Run's JSON: the API shows a run as api.RunView, whose `error`
	// is this object.
	ErrorDetail     json.RawMessage `json:"-"`
	DeadLettered    bool            `json:"dead_lettered"`
	CancelRequested bool            `json:"cancel_requested"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       time.Time       `json:"started_at,omitzero"` // the run's first start (any attempt)
	// AttemptStartedAt is when the current attempt first started (its
	// first OnRunStart; a continuation in the same attempt keeps it);
	// zero until it starts. A new attempt clears it.
	AttemptStartedAt time.Time `json:"attempt_started_at,omitzero"`
	CompletedAt      time.Time `json:"completed_at,omitzero"`
	// DurationMS is the current attempt's duration once the run ended:
	// CompletedAt − AttemptStartedAt (database clock), 0 when that
	// attempt never started.
	DurationMS int64     `json:"duration_ms,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	// TraceID is the OpenTelemetry trace of the run's spans (32 lowercase
	// hex digits; workflow_runs.trace_id), chosen at enqueue: the caller's
	// trace, or a new one. Every execution of every attempt is in it. ""
	// when the enqueuing process had tracing off.
	TraceID string `json:"trace_id,omitempty"`
	// TraceParent is the W3C traceparent (00-<trace id>-<span id>-<flags>)
	// of the run's enqueue span, the parent of each execution's span
	// (workflow_runs.trace_parent); "" with TraceID.
	TraceParent string `json:"-"`
	// Depth is how many workflow_call links separate the run from the root
	// of its tree (workflow_runs.depth): 0 for a run without a parent, its
	// parent's depth + 1 for a child, written by the store from the
	// parent's row when the run is inserted. A workflow_call of a run at
	// depth Limits.ChildDepth fails instead of starting a child.
	Depth int `json:"depth,omitempty"`
}

// Lease returns the run's current lease (zero when unleased).
func (r *Run) Lease() Lease { return Lease{RunnerID: r.LeasedBy, Epoch: r.LeaseEpoch} }

// Step is one row of workflow_steps: one step instance within one attempt,
// keyed by (RunID, Attempt, ScopePath, StepID). Tries counts the starts of
// the instance within the attempt: a retry, and a try cut off mid-flight
// and continued by another runner, are each the next try; a construct or
// a wait re-entered after a wake is not started again (see
// docs/architecture.md, "What tries means").
type Step struct {
	RunID      string     `json:"run_id"`
	Attempt    int        `json:"attempt"`
	ScopePath  string     `json:"scope_path"`
	StepID     string     `json:"step_id"`
	Kind       string     `json:"kind"`
	Status     StepStatus `json:"status"`
	Tries      int        `json:"tries"`
	StartedAt  time.Time  `json:"started_at,omitzero"`
	FinishedAt time.Time  `json:"finished_at,omitzero"`
	DurationMS int64      `json:"duration_ms"`
	Error      string     `json:"error,omitempty"`
	// UpdatedAt is when the row was last written (database clock): a
	// start, a retry, waiting, the end.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Event is one row of workflow_run_events (append-only; ID orders them).
type Event struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"run_id"`
	Attempt   int             `json:"attempt"`
	Type      EventType       `json:"event_type"`
	NodeID    string          `json:"node_id,omitempty"`
	ScopePath string          `json:"scope_path"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// Checkpoint is one row of workflow_run_checkpoints: the committed record
// that a step instance succeeded. Context holds only the context keys the
// step changed (a delta, masked); Output holds its output or a blob
// reference.
type Checkpoint struct {
	RunID           string          `json:"run_id"`
	ScopePath       string          `json:"scope_path"`
	StepID          string          `json:"step_id"`
	Attempt         int             `json:"attempt"`
	Context         json.RawMessage `json:"context"`
	Output          json.RawMessage `json:"output"`
	PreviousBodyRef string          `json:"previous_body_ref,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
}

// Definition is one row of workflow_definitions: a named workflow at one
// revision (sha256 hex of its canonical JSON).
type Definition struct {
	ID          string          `json:"id"`
	WorkspaceID string          `json:"workspace_id"`
	Name        string          `json:"name"`
	Revision    string          `json:"revision"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Source      string          `json:"source,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
}

// Role is what an API key may do (SPEC §9): viewer reads; operator also
// enqueues, cancels, retriggers, signals, redrives and writes session
// variables; admin also resumes, applies definitions and manages keys.
// worker (issue 15) stands outside that order: it may only poll,
// heartbeat, complete and fail the jobs of its workspace (what an admin
// may do too), and nothing else.
type Role string

// Roles: the three ordered ones weakest first, then worker.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
	RoleWorker   Role = "worker"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool { return r == RoleWorker || r.rank() > 0 }

// Allows reports whether a key of role r may do what needs role need: an
// ordered role allows what needs it or a weaker one; worker allows only
// what needs worker, which admin allows too.
func (r Role) Allows(need Role) bool {
	if need == RoleWorker {
		return r == RoleWorker || r == RoleAdmin
	}
	return r.rank() > 0 && r.rank() >= need.rank()
}

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// APIKey is an api_keys row (SPEC appendix A) without its hash: the key
// text itself is shown once, when it is created, and never stored.
type APIKey struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Env         string    `json:"env,omitempty"` // "" = every env
	Role        Role      `json:"role"`
	Name        string    `json:"name"`
	CreatedAt   time.Time `json:"created_at"`
	RevokedAt   time.Time `json:"revoked_at,omitzero"`
}
