package starflowtype

import (
	"encoding/json"
	"errors"
	"time"
)

// WaitKind is what a durable wait waits for (workflow_waits.kind).
type WaitKind string

// Wait kinds (SPEC §2 `wait`, `workflow_call`).
const (
	WaitSignal   WaitKind = "signal"   // an external event, by name (and correlation key)
	WaitTimer    WaitKind = "timer"    // a deadline (timer: DURATION or until: TIMESTAMP)
	WaitApproval WaitKind = "approval" // a human decision
	WaitChild    WaitKind = "child"    // a child run's end (workflow_call)
	WaitJob      WaitKind = "job"      // a remote worker's job (worker_jobs; issue 15)
)

// WaitStatus is the state of a workflow_waits row.
type WaitStatus string

// Wait statuses.
const (
	WaitPending   WaitStatus = "pending"
	WaitWoken     WaitStatus = "woken"
	WaitTimedOut  WaitStatus = "timed_out"
	WaitCancelled WaitStatus = "cancelled"
)

// ChildSignal is the workflow_wake_inbox.signal of a child run's end
// delivered to its parent before the parent's wait was registered; the
// inbox row's correlation_key is the child's run id.
const ChildSignal = "starflow.child"

// Wait is one row of workflow_waits: one durable wait of one step instance
// within one attempt. TokenHash is the hex sha256 of the wake token (the
// token itself is never stored). WakeAt is the timer deadline (zero when
// none), ExpiresAt the wait's timeout (zero when none). Payload is the wake
// payload once woken ({"timed_out": true} when timed out).
type Wait struct {
	ID             string          `json:"id"`
	RunID          string          `json:"run_id"`
	WorkspaceID    string          `json:"workspace_id"`
	Attempt        int             `json:"attempt"`
	ScopePath      string          `json:"scope_path"`
	StepID         string          `json:"step_id"`
	Kind           WaitKind        `json:"kind"`
	Signal         string          `json:"signal,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	TokenHash      string          `json:"token_hash,omitempty"`
	KeyID          string          `json:"key_id,omitempty"`
	WakeAt         time.Time       `json:"wake_at,omitzero"`
	ExpiresAt      time.Time       `json:"expires_at,omitzero"`
	Status         WaitStatus      `json:"status"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	// Notify is the wait's `notify` request ({url, headers, body}, rendered),
	// delivered once the wait is registered; nil when none.
	Notify      json.RawMessage `json:"notify,omitempty"`
	NotifiedAt  time.Time       `json:"notified_at,omitzero"`
	NotifyTries int             `json:"notify_tries,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	ConsumedAt  time.Time       `json:"consumed_at,omitzero"`
	// Form is an approval wait's form (the definition's wait.approval.form
	// rendered when the wait registered, secrets scrubbed: fields, labels,
	// required, as the definition wrote them); nil for other waits and an
	// approval without a form.
	Form json.RawMessage `json:"form,omitempty"`
}

// InboxEntry is one row of workflow_wake_inbox: a wake that arrived before
// its wait existed. RunID is empty when it is addressed by correlation key.
type InboxEntry struct {
	ID             string          `json:"id"`
	WorkspaceID    string          `json:"workspace_id"`
	RunID          string          `json:"run_id,omitempty"`
	Signal         string          `json:"signal"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	ConsumedAt     time.Time       `json:"consumed_at,omitzero"`
}

// SessionVar is one row of workflow_session_vars. KeepUntil zero means the
// value is dropped when OriginRunID ends.
type SessionVar struct {
	WorkspaceID string          `json:"workspace_id"`
	SessionID   string          `json:"session_id"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value"`
	OriginRunID string          `json:"origin_run_id,omitempty"`
	KeepUntil   time.Time       `json:"keep_until,omitzero"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// Wake errors. The HTTP API maps ErrTokenInvalid to 401, ErrWaitClosed
// to 410 (SPEC §6) and ErrPayloadInvalid to 400.
var (
	// ErrTokenInvalid: a wake token that does not verify (forged, malformed,
	// signed by an unknown key, or naming another run than the one asked
	// for). Nothing changed.
	ErrTokenInvalid = errors.New("wake token invalid")
	// ErrWaitClosed: the wait is no longer pending (already woken, timed
	// out, cancelled) or its token expired. Nothing changed.
	ErrWaitClosed = errors.New("wait closed")
	// ErrPayloadInvalid: a wake or signal payload that is not one JSON
	// value, or holds a number with no finite value (1e400). Checked before
	// the token is verified or anything is written: nothing changed, and
	// the token still wakes its wait with a valid payload. The HTTP API
	// maps it to 400.
	ErrPayloadInvalid = errors.New("wake payload invalid")
	// ErrNoWakeKeys: a process that must sign or verify wake tokens has no
	// key ring: none configured (STARFLOW_WAKE_KEYS, a key file) and a
	// store that keeps none (PostgreSQL keeps only key ids and
	// fingerprints; processes on many machines must share one ring).
	ErrNoWakeKeys = errors.New("no wake-token keys: a PostgreSQL store keeps no signing secret and every process must sign and verify with the same keys; " +
		"set STARFLOW_WAKE_KEYS (kid:base64secret, e.g. k1:$(openssl rand -base64 32)) or STARFLOW_WAKE_KEY_FILE (a 0600 file of such lines) on every process")
	// ErrWakeKeyMismatch: a key of this process's ring has another secret
	// than the key another process registered in the store under the same
	// id (their fingerprints differ): tokens one signs would not verify on
	// the other.
	ErrWakeKeyMismatch = errors.New("wake key differs from the one registered under its id")
)
