// Package warm is the live-state tier (SPEC §8): a projection of the cold
// tier kept for dashboards and live views, never authoritative. Entries are
// written by the mirror drainer (internal/mirror) from mirror_outbox rows,
// each carrying the cold version of its run, so a late write never replaces
// newer data. Step progress and runner presence are written here only.
//
// Implementations: warm/memory (one process) and warm/natskv (JetStream
// key-value, many processes; also an embedded nats-server). Both pass
// warm/warmtest; warm/warmopen opens one by name (--warm). This package
// also holds the PresencePublisher and the ProgressSink, which write
// presence and progress to any Store.
//
// Import rule: the standard library only.
package warm

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound: no entry under that key.
var ErrNotFound = errors.New("warm: not found")

// ErrUnavailable wraps the errors of a store that cannot be reached right
// now (a NATS server down or restarting, a call past its timeout). The
// caller keeps its data and retries later; the store reconnects by itself.
var ErrUnavailable = errors.New("warm: store unavailable")

// RunEntry is the warm projection of one run: what live views show.
// Version is the run's cold version (mirror_outbox.version, monotonic per
// run); Hash is the drift hash over (status, phase, current steps, version)
// computed by the mirror (internal/mirror) — stores keep it opaque.
type RunEntry struct {
	RunID        string          `json:"run_id"`
	WorkspaceID  string          `json:"workspace_id"`
	WorkflowName string          `json:"workflow_name"`
	Status       string          `json:"status"`
	ClaimState   string          `json:"claim_state"`
	Phase        string          `json:"phase,omitempty"`
	Attempt      int             `json:"attempt"`
	LeasedBy     string          `json:"leased_by,omitempty"`
	CurrentSteps []StepEntry     `json:"current_steps,omitempty"` // instances running or waiting
	Error        string          `json:"error,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Version      int64           `json:"version"`
	Hash         string          `json:"hash,omitempty"`
	UpdatedAt    time.Time       `json:"updated_at"`
	FinishedAt   time.Time       `json:"finished_at,omitzero"`
}

// StepEntry is the warm projection of one step instance. UpdatedAt is the
// time of the last cold write to the step's row (workflow_steps.updated_at,
// database clock): its start, a failed try, the start of its wait, its end.
type StepEntry struct {
	RunID     string    `json:"run_id"`
	Attempt   int       `json:"attempt"`
	ScopePath string    `json:"scope_path"`
	StepID    string    `json:"step_id"`
	Kind      string    `json:"kind,omitempty"`
	Status    string    `json:"status"`
	Tries     int       `json:"tries,omitempty"`
	Error     string    `json:"error,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// EventEntry is one run event in the warm tier's recent-events feed: the
// workflow_run_events row as stored in the cold tier (id, run_id, attempt,
// event_type, node_id, scope_path, payload, created_at). ID is the cold
// row's id (positive, increasing per run in commit order); the feed is
// keyed and ordered by it.
type EventEntry struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"run_id"`
	Attempt   int             `json:"attempt"`
	EventType string          `json:"event_type"`
	NodeID    string          `json:"node_id,omitempty"`
	ScopePath string          `json:"scope_path"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// PayloadOmitted: the store dropped Payload because the event alone
	// exceeded the store's size bound for a run's feed (natskv); the cold
	// event keeps it.
	PayloadOmitted bool      `json:"payload_omitted,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// EventsKeepDefault is the number of recent events kept per run when
// AppendEvents is called with keep <= 0.
const EventsKeepDefault = 200

// Progress is a step's progress report (SPEC §8 onStepProgress): warm only,
// never written to the cold tier. Fraction is in [0, 1].
type Progress struct {
	RunID     string    `json:"run_id"`
	ScopePath string    `json:"scope_path"`
	StepID    string    `json:"step_id"`
	Fraction  float64   `json:"fraction"`
	Message   string    `json:"message,omitempty"`
	At        time.Time `json:"at"`
}

// Presence is a runner's heartbeat in the warm tier (peer discovery).
type Presence struct {
	RunnerID string    `json:"runner_id"`
	Pools    []string  `json:"pools,omitempty"`
	RunsHeld int       `json:"runs_held"`
	LastBeat time.Time `json:"last_beat"`
}

// Store is a warm store. Every method is safe for concurrent use. Errors
// other than ErrNotFound mean the store is unreachable or refused the
// write; callers (the drainer) retry later.
type Store interface {
	// PutRun stores e unless the stored entry has a Version greater than or
	// equal to e.Version (a late or repeated write is a no-op). Reports
	// whether it wrote. Force (used by the drift sweep to repair) writes
	// regardless of version.
	PutRun(ctx context.Context, e *RunEntry, force bool) (bool, error)
	// GetRun reads one run entry; ErrNotFound when absent.
	GetRun(ctx context.Context, runID string) (*RunEntry, error)
	// DeleteRun removes a run entry and its steps, events and progress (no
	// error when absent).
	DeleteRun(ctx context.Context, runID string) error
	// ListRunIDs lists the ids of every run entry (order unspecified).
	ListRunIDs(ctx context.Context) ([]string, error)

	// PutStep stores one step instance (last write wins).
	PutStep(ctx context.Context, s *StepEntry) error
	// ListSteps lists a run's step entries.
	ListSteps(ctx context.Context, runID string) ([]*StepEntry, error)

	// AppendEvents adds evs (events of runID) to the run's recent-events
	// feed and keeps only the newest keep of them by id (keep <= 0:
	// EventsKeepDefault). Idempotent by event id: an event already in the
	// feed, or older than every event kept of a full feed, adds nothing.
	// ErrInvalid when runID is empty or an event is nil, has an id <= 0, an
	// empty event_type or another run's id.
	AppendEvents(ctx context.Context, runID string, evs []*EventEntry, keep int) error
	// ListEvents lists the run's feed events with id > afterID, oldest
	// first (empty, no error, when there are none or the run has no feed).
	ListEvents(ctx context.Context, runID string, afterID int64) ([]*EventEntry, error)

	// PutSessionVar stores a session variable's live value; a nil Value
	// deletes it.
	PutSessionVar(ctx context.Context, workspace, session, key string, value json.RawMessage) error
	// GetSessionVar reads one; ErrNotFound when absent.
	GetSessionVar(ctx context.Context, workspace, session, key string) (json.RawMessage, error)

	// PutProgress stores a step's latest progress report.
	PutProgress(ctx context.Context, p *Progress) error
	// ListProgress lists a run's latest progress reports, one per step
	// instance.
	ListProgress(ctx context.Context, runID string) ([]*Progress, error)

	// PutPresence publishes a runner's presence; it disappears after ttl
	// unless published again.
	PutPresence(ctx context.Context, p *Presence, ttl time.Duration) error
	// ListPresence lists the runners whose presence has not expired.
	ListPresence(ctx context.Context) ([]*Presence, error)

	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases connections.
	Close() error
}
