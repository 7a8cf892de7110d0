// Package api holds the wire types of Starflow's HTTP API: the JSON
// bodies the server (`starflow server`, `starflow dev`) reads and writes
// and the Go client (package client) sends and decodes. The server
// generates its OpenAPI 3.1 document (GET /openapi.json) from these types;
// docs/api.md describes the routes, auth and roles.
//
// Runs, steps, events, checkpoints, waits, definitions and session
// variables travel as their starflowtype shapes; health and sweeps as
// the engine's (starflow.Health, starflow.SweepHistory). Timestamps are RFC 3339
// (UTC); durations are Go duration strings ("30s", "1h30m").
package api

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

// Problem is an RFC 9457 problem document, the body of every error
// answer (Content-Type application/problem+json). Code is set on 409s:
// CodeConflict, CodeRevisionMismatch, CodeNoCheckpoint.
type Problem struct {
	Type   string `json:"type,omitempty" doc:"A URI naming the problem type; about:blank when it is only the status."`
	Title  string `json:"title" doc:"A short summary of the problem type."`
	Status int    `json:"status" doc:"The HTTP status code."`
	Detail string `json:"detail,omitempty" doc:"What went wrong with this request, and what to do."`
	Code   string `json:"code,omitempty" doc:"A machine-readable reason on 409s: conflict, revision_mismatch, no_checkpoint, lease_lost."`
	// Errors are the invalid fields of a request that failed validation.
	Errors []ProblemError `json:"errors,omitempty" doc:"The invalid parts of the request, when it failed validation."`
}

// ProblemError is one invalid part of a request: where (a JSON path such
// as body.input or query.limit) and what.
type ProblemError struct {
	Message  string `json:"message"`
	Location string `json:"location,omitempty"`
	Value    any    `json:"value,omitempty"`
}

// Codes of 409 problems (Problem.Code).
const (
	CodeConflict         = "conflict"
	CodeRevisionMismatch = "revision_mismatch"
	CodeNoCheckpoint     = "no_checkpoint"
	// CodeLeaseLost: a remote worker's call with a fencing token that is
	// not the job's current claim, an expired lease, or a job that is no
	// longer running (issue 15). The worker stops the job.
	CodeLeaseLost = "lease_lost"
)

// NoCheckpointHint ends the detail of POST /api/runs/{id}/resume's 409
// no_checkpoint: how to resume such a run through the API (the body field,
// not the CLI's flag).
const NoCheckpointHint = `; send {"mode": "replay"} to start it from the first step`

// Error implements error: the client returns a *Problem for every non-2xx
// answer. Its text is the detail (or the title), followed by each invalid
// part of the request when there are any: "validation failed:
// body.priority: expected number <= 1000000 (got 99999999999)".
func (p *Problem) Error() string {
	s := p.Detail
	if s == "" {
		s = p.Title
	}
	parts := make([]string, 0, len(p.Errors))
	for _, e := range p.Errors {
		if e.Message != "" && strings.Contains(s, e.Message) {
			continue // the detail says it already
		}
		part := e.Message
		if e.Location != "" {
			part = e.Location + ": " + part
		}
		// A short value of a field says what was sent; the whole body
		// ("body") is never repeated.
		if raw, err := json.Marshal(e.Value); err == nil && e.Value != nil && e.Location != "body" && len(raw) <= 64 {
			part += " (got " + string(raw) + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	return s
}

// GetStatus is the HTTP status (the server's error interface).
func (p *Problem) GetStatus() int { return p.Status }

// ContentType is the media type of a problem document.
func (p *Problem) ContentType(string) string { return "application/problem+json" }

// WorkflowList is the body of GET /api/workflows: each workflow's current
// revision (without spec and source), by name.
type WorkflowList struct {
	Workflows []*starflowtype.Definition `json:"workflows"`
}

// RevisionList is the body of GET /api/workflows/{name}/revisions: every
// applied revision, the most recently applied first.
type RevisionList struct {
	Revisions []*starflowtype.Definition `json:"revisions"`
}

// Applied is the body of PUT /api/workflows/{name}: the stored revision,
// and whether it differs from the revision that was current before.
type Applied struct {
	Definition *starflowtype.Definition `json:"definition"`
	Changed    bool                     `json:"changed" doc:"False when the source is exactly the current revision."`
}

// Validation is the body of POST /admin/validate.
type Validation struct {
	Valid  bool              `json:"valid"`
	Errors []ValidationError `json:"errors"`
}

// ValidationError is one problem of a definition, 1-based. A position
// that is not known is left out: column absent (0) when only the line is
// known (a YAML syntax error: the YAML parser gives no column), line
// absent too when neither is.
type ValidationError struct {
	Line    int    `json:"line,omitempty" doc:"The line (from 1); absent when no position is known."`
	Column  int    `json:"column,omitempty" doc:"The column (from 1, in characters); absent when only the line is known, as for YAML syntax errors."`
	Message string `json:"message"`
}

// EnqueueRequest is the body of POST /run/{workflow}/enqueue. Only Input
// is required.
type EnqueueRequest struct {
	Input        json.RawMessage           `json:"input" doc:"The run input: a JSON object, checked against the definition's input_schema."`
	RecoveryMode starflowtype.RecoveryMode `json:"recovery_mode,omitempty" enum:"replay,resume,manual" doc:"Overrides the definition's recovery mode."`
	Pool         string                    `json:"pool,omitempty" maxLength:"200" doc:"Runner pool; default the definition's runner_pool, or any."`
	Priority     int                       `json:"priority,omitempty" minimum:"-1000000" maximum:"1000000" doc:"Higher is claimed first."`
	Delay        string                    `json:"delay,omitempty" maxLength:"40" doc:"Available only after this long: a Go duration such as 30s or 1h."`
	MaxAttempts  int                       `json:"max_attempts,omitempty" minimum:"0" maximum:"1000" doc:"Overrides the definition's max_attempts."`
	Revision     string                    `json:"revision,omitempty" maxLength:"64" doc:"A stored revision (sha256 hex); default the current one."`
}

// RunView is a run as GET /api/runs/{id}, the run listings and the ledger
// answer it: every field of the workflow_runs row (starflowtype.Run, in
// place) but its error, which is the typed error object (Error:
// {type, message, step_id, scope_path, status, body, cause, details};
// workflow_runs.error keeps its message), and Stuck, its why-stuck reason
// ({reason, since, detail}; see starflowtype.Stuck and docs/api.md),
// computed from the cold store when the answer was made. Stuck is absent
// when the run is not stuck: it ended, or it runs under a fresh lease.
// Build one with NewRunView.
type RunView struct {
	*starflowtype.Run
	Error *starflowtype.ErrorInfo `json:"error,omitempty" doc:"The run's typed error, absent while it has none: type (http, network, timeout, expression, egress_refused, input_invalid, max_iterations_exceeded, child_failed, cancelled, fail, error, or a custom step's type), message, and where they apply step_id, scope_path, status, body, cause (a child run's error) and details."`
	Stuck *starflowtype.Stuck     `json:"stuck,omitempty" doc:"Why the run is not moving on its own (absent when it ended, or runs under a fresh lease): reason, since (RFC 3339) and detail (a message and the reason's fields)."`
}

// NewRunView returns the view of run r with its why-stuck reason (nil:
// none). Error is the stored error object (workflow_runs.error_json), or,
// for an error recorded without one (the sweep's, an operator's, a run
// failed before typed errors), {type: "error", message: the error text}.
func NewRunView(r *starflowtype.Run, stuck *starflowtype.Stuck) *RunView {
	v := &RunView{Run: r, Stuck: stuck}
	if r == nil {
		return v
	}
	if v.Error = starflowtype.ParseErrorInfo(r.ErrorDetail); v.Error == nil && r.Error != "" {
		v.Error = &starflowtype.ErrorInfo{Type: starflowtype.ErrorUntyped, Message: r.Error}
	}
	return v
}

// UnmarshalJSON reads a view and gives its Run the error it shows: the
// object as ErrorDetail and, when the text is absent, its message as
// Error, so code that reads the Run (the CLI on a remote server) sees
// the run's error.
func (v *RunView) UnmarshalJSON(b []byte) error {
	type plain RunView
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*v = RunView(p)
	if v.Run != nil && v.Error != nil {
		v.Run.ErrorDetail, _ = json.Marshal(v.Error)
		if v.Run.Error == "" {
			v.Run.Error = v.Error.Message
		}
	}
	return nil
}

// ErrorLine is the run's error on one line, the same from the store and
// from a server: "step <step_id>: <message>" of its typed error (the
// step that failed first), its message alone for an error that is not a
// step's, "" when the run has no error.
func (v *RunView) ErrorLine() string {
	switch {
	case v.Error == nil:
		return ""
	case v.Error.StepID != "":
		return "step " + v.Error.StepID + ": " + v.Error.Message
	}
	return v.Error.Message
}

// RunList is a page of runs: GET /api/runs, GET /api/dead-letters,
// GET /api/runs/{id}/children, each with its why-stuck reason. NextCursor
// is "" on the last page.
type RunList struct {
	Runs       []*RunView `json:"runs"`
	NextCursor string     `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
}

// Ledger is the body of GET /api/runs/{id}/ledger (seed 003): the run,
// its step rows (every attempt, in start order) and its events (id order).
type Ledger struct {
	Run    *RunView              `json:"run"`
	Steps  []*starflowtype.Step  `json:"steps"`
	Events []*starflowtype.Event `json:"events"`
}

// EventList is the body of GET /api/runs/{id}/events.
type EventList struct {
	Events []*starflowtype.Event `json:"events"`
}

// CheckpointList is the body of GET /api/runs/{id}/checkpoints.
type CheckpointList struct {
	Checkpoints []*starflowtype.Checkpoint `json:"checkpoints"`
}

// WaitList is the body of GET /api/runs/{id}/waits (token hashes left
// out).
type WaitList struct {
	Waits []*starflowtype.Wait `json:"waits"`
}

// ResumeRequest is the body of POST /api/runs/{id}/resume.
type ResumeRequest struct {
	Mode     starflowtype.RecoveryMode `json:"mode,omitempty" enum:"resume,replay" doc:"resume (restore committed steps; default) or replay (start over)."`
	Revision string                    `json:"revision,omitempty" enum:"pinned,current" doc:"pinned (the run's revision; default) or current (the newest applied)."`
}

// SignalRequest is the body of POST /api/runs/{id}/signal.
type SignalRequest struct {
	Name    string          `json:"name" minLength:"1" maxLength:"200" doc:"The signal a wait step waits for."`
	Payload json.RawMessage `json:"payload,omitempty" doc:"The wait step's output (default null)."`
}

// KeySignalRequest is the body of POST /api/signals: a signal addressed
// by correlation key.
type KeySignalRequest struct {
	Name           string          `json:"name" minLength:"1" maxLength:"200"`
	CorrelationKey string          `json:"correlation_key" minLength:"1" maxLength:"500"`
	Payload        json.RawMessage `json:"payload,omitempty"`
}

// SignalResult says where a signal went: Wait when it woke one, Inbox
// when no wait was pending and it is held for the first to register.
type SignalResult struct {
	Wait  *starflowtype.Wait       `json:"wait,omitempty"`
	Inbox *starflowtype.InboxEntry `json:"inbox,omitempty"`
}

// SessionVarList is the body of GET /api/sessions/{session}/vars.
type SessionVarList struct {
	Vars []*starflowtype.SessionVar `json:"vars"`
}

// SessionVarRequest is the body of PUT /api/sessions/{session}/vars/{key}.
type SessionVarRequest struct {
	Value   json.RawMessage `json:"value" doc:"Any JSON value."`
	KeepFor string          `json:"keep_for,omitempty" maxLength:"40" doc:"Remove the variable this long after the write (a Go duration); default kept until deleted."`
}

// KeyRequest is the body of POST /api/keys: a new key in the caller's
// workspace.
type KeyRequest struct {
	Name string            `json:"name" minLength:"1" maxLength:"200"`
	Role starflowtype.Role `json:"role" enum:"viewer,operator,admin,worker" doc:"viewer, operator or admin (each may do what the one before may, and more), or worker: a remote worker's key, which may only poll, heartbeat, complete and fail jobs."`
	Env  string            `json:"env,omitempty" maxLength:"100" pattern:"^[a-z0-9][a-z0-9_-]*$" patternDescription:"lower-case letters, digits, - and _, starting with a letter or digit" doc:"Limit the key to runs of this env (a name: [a-z0-9][a-z0-9_-]*); default every env."`
}

// CreatedKey is the answer to POST /api/keys: the key row and, once, the
// key itself (sf_…).
type CreatedKey struct {
	Key    *starflowtype.APIKey `json:"key"`
	Secret string               `json:"secret" doc:"The key to send as Authorization: Bearer; shown only now."`
}

// KeyList is the body of GET /api/keys.
type KeyList struct {
	Keys []*starflowtype.APIKey `json:"keys"`
}

// Me is the body of GET /api/me: who the caller is, so a page offers only
// the actions its role may do.
type Me struct {
	Auth      string            `json:"auth" enum:"key,open" doc:"key: the request carried an API key; open: no key exists yet and the loopback caller acts as an admin."`
	KeyID     string            `json:"key_id,omitempty" doc:"The key's id (absent for the open caller)."`
	KeyName   string            `json:"key_name,omitempty" doc:"The key's name."`
	Role      starflowtype.Role `json:"role" enum:"viewer,operator,admin"`
	Workspace string            `json:"workspace"`
	Env       string            `json:"env,omitempty" doc:"The env the key is limited to; absent: every env of the workspace."`
	Via       string            `json:"via,omitempty" enum:"bearer,cookie" doc:"How the key came: the Authorization header (bearer) or the sign-in cookie (cookie); absent for the open caller."`
}

// Auth values of Me.
const (
	AuthKey  = "key"
	AuthOpen = "open"
)

// HealthReport is the body of GET /api/health: the health answer of
// /healthz (starflow.Health: cold store, warm level, outbox depth and
// lag), the live runners, what this process's lease sweeps recovered
// lately and the newest recovery events of every process, all within
// the caller's workspace (and env) where they belong to one.
type HealthReport struct {
	starflow.Health
	// Runners are the live runners, by id: from the warm tier's presence
	// when there is one (and it answers), else from the cold store's
	// workflow_runners rows of runners that claim from the caller's
	// workspace.
	Runners []HealthRunner `json:"runners"`
	// Sweeps are this process's recent lease-sweep passes (its runs of
	// other workspaces and envs left out).
	Sweeps starflow.SweepHistory `json:"sweeps"`
	// Recoveries are the newest recovery events (runner_lost, lease_lost,
	// run_interrupted, run_dead_lettered) of the caller's runs, whichever
	// process wrote them, newest first, at most 50.
	Recoveries []*starflowtype.RecoveryEvent `json:"recoveries"`
}

// HealthRunner is one live runner of a HealthReport.
type HealthRunner struct {
	ID    string   `json:"id"`
	Pools []string `json:"pools,omitempty" doc:"The runner pools it serves besides runs with no pool."`
	// RunsHeld is how many runs it held when last seen; Concurrency the
	// most it runs at once (0: unknown, from the warm tier alone).
	RunsHeld    int       `json:"runs_held"`
	Concurrency int       `json:"concurrency,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero" doc:"When it started (from the cold store; absent when it has no row)."`
	SeenAt      time.Time `json:"seen_at" doc:"Its last presence beat (warm) or heartbeat (cold)."`
	Source      string    `json:"source" enum:"warm,cold" doc:"Where the entry came from: the warm tier's presence or the cold store's workflow_runners."`
}

// Sources of HealthRunner.
const (
	SourceWarm = "warm"
	SourceCold = "cold"
)

// Ready is the body of GET /readyz.
type Ready struct {
	Ready   bool      `json:"ready"`
	Detail  string    `json:"detail,omitempty"`
	Checked time.Time `json:"checked_at"`
}

// LiveEvent is the data of an `event` message on a live SSE stream: one
// event of the run, as the warm tier's feed (or the cold store without
// one) holds it. Its id is the event's id.
type LiveEvent struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"run_id"`
	Attempt   int             `json:"attempt"`
	Type      string          `json:"event_type"`
	NodeID    string          `json:"node_id,omitempty"`
	ScopePath string          `json:"scope_path,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// LiveProgress is the data of a `progress` message on a run's live SSE
// stream: a step's latest progress report (warm tier only; a custom step
// reports it with step.Request.Progress). Fraction is 0..1.
type LiveProgress struct {
	RunID     string    `json:"run_id"`
	ScopePath string    `json:"scope_path"`
	StepID    string    `json:"step_id"`
	Fraction  float64   `json:"fraction"`
	Message   string    `json:"message,omitempty"`
	At        time.Time `json:"at"`
}

// LiveRun is the data of a `run` message on a live SSE stream: a run's
// state when it changed.
type LiveRun struct {
	RunID        string                 `json:"run_id"`
	WorkflowName string                 `json:"workflow_name"`
	Status       starflowtype.RunStatus `json:"status"`
	Phase        string                 `json:"phase,omitempty"`
	Attempt      int                    `json:"attempt"`
	Error        string                 `json:"error,omitempty"`
	Output       json.RawMessage        `json:"output,omitempty"`
	Version      int64                  `json:"version,omitempty"`
	UpdatedAt    time.Time              `json:"updated_at"`
}
