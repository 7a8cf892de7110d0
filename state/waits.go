package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Waiter is the part of Adapter behind durable waits, wakes, session
// variables and wake keys (SPEC §6, seed 000 "The wait/wake ordering
// invariant"). The engine enters a durable wait with three fenced writes,
// in this order, each its own transaction (the commit boundaries the
// fault-injection tests pause at):
//
//  1. OnRunPaused: status paused, the step row waiting, the context
//     snapshot (checkpoint_json), phase, run_paused. The lease is still
//     held (claim_state stays running), so a runner that dies here is
//     swept like any other and the run is retried.
//  2. RegisterWait: the workflow_waits row (pending) and, in the same
//     transaction, the oldest matching unconsumed inbox entry is consumed
//     (the wait becomes woken with its payload at once).
//  3. ParkRun: the lease is released; claim_state parked, or queued when a
//     wait of the run's current attempt is already woken or timed out.
//
// Only after 2 does anything outside learn of the wait (token, notify).
//
// Wakes (WakeWait, Signal, FireDueWaits, a child run's end) each complete
// the wait and re-queue a parked run in one transaction; a wake that finds
// the run still held by its runner (between 2 and 3) only completes the
// wait, and ParkRun then queues the run instead of parking it. Wakes lock
// the run row first (PostgreSQL: SELECT … FOR UPDATE) and ParkRun does
// too, so the two serialise.
//
// A run's end (OnRunComplete, OnRunError without retry, OnRunCancelled,
// CancelRun, a sweep that dead-letters) also, in its own transaction:
// drops the session variables the run wrote without keep_until; cancels
// its pending waits; and, when the run has a parent_run_id, delivers
// {"run_id", "status", "output", "error"} to the parent: the parent's
// pending child wait whose correlation_key is this run's id is woken
// (and the parent re-queued when parked), or else an inbox row (run_id
// parent, signal starflowtype.ChildSignal, correlation_key child id) is
// written. CancelRun also cancels the run's non-terminal children
// (recursively), and so do OnRunCancelled and ParkRun's cancel (a child
// enqueued after CancelRun set cancel_requested). The sweep cancels the
// pending waits of the attempt it interrupts.
//
// Details every adapter implements the same way (state/statetest checks
// them):
//   - A wait is stored in its run's workspace (RegisterWaitParams.WorkspaceID
//     is not used); a child wait registered without a Signal is stored with
//     signal starflowtype.ChildSignal.
//   - OnRunStart on a paused run (a woken run's resume) writes status
//     running, clears checkpoint_json (ClaimRun returned it) and appends
//     run_resumed instead of run_started. OnRunStart clears checkpoint_json
//     on every start.
//   - A wake re-queues a parked run only when the woken wait's step row
//     is still waiting: a wait whose step the engine gave up (recorded
//     failed) is completed but resumes nothing.
//   - ParkRun of a run that is not paused is ErrConflict. ParkRun of a run
//     an operator asked to cancel while it entered its wait (claimed or
//     running, so CancelRun only set cancel_requested) ends it there as an
//     immediate cancel does, and returns it cancelled: no runner would see
//     the request once it is parked.
//   - Inbox matching (RegisterWait): an entry addressed to the run matches
//     when its signal equals the wait's and it has no correlation key or the
//     wait's; an entry addressed by key alone (run_id NULL) matches a wait of
//     the same workspace, signal and key. The oldest (created_at, then
//     insertion order) is consumed; one entry wakes one wait.
//   - Signal wakes the oldest pending signal or approval wait that matches
//     and whose timeout has not passed; child and timer waits are never
//     woken by Signal. WakeWait of a wait whose timeout passed (not yet
//     fired by the poller) is ErrWaitClosed and changes nothing.
//   - Wake payloads: the caller's (Signal, WakeWait, inbox) as given;
//     timers {"fired_at": "<database now, RFC 3339>"}; timeouts
//     {"timed_out": true}; a child's end ChildPayload. The wake_received
//     event's payload is WakePayload (wait_id, kind, status, via, signal),
//     not the wake payload.
//   - A child's end is delivered only to a parent that exists and has not
//     ended (a parent that ended waits for nothing). A child is started
//     once per step instance across the parent's attempts (the engine
//     derives its id without the attempt), so a later attempt's child wait
//     may name a child that ended long ago: RegisterWait of a child wait
//     that consumes no inbox entry completes it from the child's row
//     (ChildPayload of its status, output, error and error_json, via
//     "child") when that run is a child of this run and has ended.
//   - An attempt that ends while the run goes on (the sweep, OnRunError
//     re-queueing or holding for an operator) gives the wakes it received
//     but never resumed (a woken wait whose step row is still waiting) back
//     to the inbox, addressed to the run with the wait's signal and key,
//     so the next attempt's wait consumes them: a signal that arrived
//     between RegisterWait and a crash is applied once, not lost. Timer
//     wakes are not given back (the next attempt starts its timer again).
//   - Change (hooks): Waits lists every wait row the write inserted or
//     changed, as written; SessionVars the variables upserted, and those
//     removed with a nil Value; a write that also changed other runs than
//     its RunID (a child's end re-queueing its parent, a cancel cascading
//     to children) lists them in Runs.
//   - Faultpoints: "<dialect>.<Op>.before_commit" for every Waiter write
//     as for the other writes, and inside every wake "<dialect>.wake.after_wait"
//     (the wait row completed) and "<dialect>.wake.after_event"
//     (wake_received appended, run not yet re-queued).
type Waiter interface {
	// OnRunPaused is commit boundary 1 (seed: onRunPaused + saveCheckpoint
	// + recordPhaseIfChanged, one transaction, fenced): status paused,
	// workflow_steps row (StepKey) status waiting, checkpoint_json =
	// Snapshot, phase = Phase (a phase event when it changed), run_paused
	// event with {scope_path, step_id, kind}. When an operator asked to
	// cancel the run it writes nothing and returns
	// starflowtype.ErrCancelRequested, as OnNodeStart does: a run being
	// cancelled enters no wait and starts no child.
	OnRunPaused(ctx context.Context, p *RunPausedParams) error
	// RegisterWait is commit boundary 2 (fenced). It inserts the pending
	// workflow_waits row for the step instance, or returns the existing
	// row of that (run, attempt, scope, step) unchanged (a re-entered wait
	// after a crash does not register twice). For kinds signal, approval
	// and child it then consumes the oldest unconsumed matching inbox
	// entry (run_id = RunID and signal = Signal, or run_id NULL and
	// signal = Signal and correlation_key = CorrelationKey; for child:
	// run_id = RunID, signal ChildSignal, correlation_key = child id):
	// the wait becomes woken with the entry's payload, consumed_at set,
	// and wake_received is appended. Returns the row as stored.
	RegisterWait(ctx context.Context, p *RegisterWaitParams) (*starflowtype.Wait, error)
	// ParkRun is commit boundary 3 (fenced): leased_by/lease_until cleared;
	// claim_state queued (available now) when a wait of the current
	// attempt is woken or timed out and not yet resumed, else parked.
	// Returns the run as written.
	ParkRun(ctx context.Context, p *ParkRunParams) (*starflowtype.Run, error)
	// GetWait reads one wait by ID, or by (RunID, Attempt, ScopePath,
	// StepID). ErrNotFound when absent.
	GetWait(ctx context.Context, p *GetWaitParams) (*starflowtype.Wait, error)
	// ListWaits lists waits, oldest first.
	ListWaits(ctx context.Context, p *ListWaitsParams) ([]*starflowtype.Wait, error)

	// WakeWait wakes one wait by id with a verified token (the caller
	// checked the HMAC and expiry; the store checks TokenHash and that the
	// wait is pending), in one transaction: wait woken (payload,
	// consumed_at), wake_received event, parked run re-queued. ErrNotFound
	// when no wait has that id and token hash (and RunID, when set);
	// starflowtype.ErrWaitClosed when it is not pending. Nothing changes
	// on error. Exactly one of many concurrent calls succeeds.
	WakeWait(ctx context.Context, p *WakeWaitParams) (*starflowtype.Wait, error)
	// Signal delivers a named signal: to the oldest pending signal or
	// approval wait matching (RunID and Signal, or Signal and
	// CorrelationKey), woken as WakeWait does; when none matches, an inbox
	// row is written for the wait to consume when it registers.
	// ErrNotFound when RunID is set and the run does not exist;
	// ErrConflict when that run has ended.
	Signal(ctx context.Context, p *SignalParams) (*SignalResult, error)
	// FireDueWaits is the durable timer poller: pending waits whose wake_at
	// (timer) is at or before the database's now become woken with payload
	// {"fired_at": …}; those whose expires_at (timeout) passed become
	// timed_out with payload {"timed_out": true}; each with a
	// wake_received event and its parked run re-queued, one transaction
	// per wait. Returns the waits changed.
	FireDueWaits(ctx context.Context, p *FireDueWaitsParams) ([]*starflowtype.Wait, error)
	// PendingNotifies lists registered waits with a notify request not
	// yet delivered (notified_at NULL, status pending) whose next try is
	// due (database clock), oldest first.
	PendingNotifies(ctx context.Context, p *PendingNotifiesParams) ([]*starflowtype.Wait, error)
	// MarkNotified records a notify try: delivered (notified_at = now) or
	// failed (notify_tries + 1, next try at now + RetryIn).
	MarkNotified(ctx context.Context, p *MarkNotifiedParams) error

	// SessionGet reads one session variable. ErrNotFound when absent or
	// expired (keep_until passed).
	SessionGet(ctx context.Context, p *SessionGetParams) (*starflowtype.SessionVar, error)
	// SessionSet upserts one session variable (fenced by the writing
	// run's lease): value_json, origin_run_id = RunID, keep_until,
	// updated_at.
	SessionSet(ctx context.Context, p *SessionSetParams) (*starflowtype.SessionVar, error)
	// DeleteExpiredSessionVars is the session GC: removes variables whose
	// keep_until is before the database's now. Returns how many.
	DeleteExpiredSessionVars(ctx context.Context, p *DeleteExpiredSessionVarsParams) (int64, error)

	// WakeKeys lists the registered wake-token keys (ids and
	// fingerprints, never secrets), newest first.
	WakeKeys(ctx context.Context) ([]WakeKey, error)
	// AddWakeKey registers a key's id and fingerprint and returns the
	// registered row. Registering an id again changes nothing and returns
	// the row as first registered, so a caller whose fingerprint differs
	// learns that another process signs with another secret under that id;
	// the one exception is a row with an empty fingerprint (a key whose
	// secret migration 00008 moved out of the database), which takes k's.
	AddWakeKey(ctx context.Context, k WakeKey) (WakeKey, error)
}

// WakeKey is what a store keeps of a wake-token signing key: its id and a
// fingerprint (waketoken.Fingerprint), never its secret (issue 10: a table
// readable with the data must not hold what signs tokens). The secrets
// come from STARFLOW_WAKE_KEYS or a key file.
type WakeKey struct {
	ID string
	// Fingerprint is 64 lowercase hex characters; "" only for a key
	// migrated from a database older than migration 00008, until a
	// process holding its secret registers it again.
	Fingerprint string
	CreatedAt   time.Time
}

// ErrNotImplemented is returned by adapters for operations they do not
// support yet.
var ErrNotImplemented = errors.New("not implemented by this adapter")

// RunPausedParams is commit boundary 1 of a durable wait.
type RunPausedParams struct {
	StepKey
	Lease    starflowtype.Lease
	Kind     string          // the step's kind ("wait", "workflow_call")
	Snapshot json.RawMessage // the full context (masked), stored in checkpoint_json
	Phase    string          // "" = unchanged
	Payload  json.RawMessage // run_paused payload extras, may be nil
}

// RegisterWaitParams is commit boundary 2 of a durable wait.
type RegisterWaitParams struct {
	StepKey
	Lease          starflowtype.Lease
	ID             string // uuid; generated when empty
	WorkspaceID    string
	Kind           starflowtype.WaitKind
	Signal         string
	CorrelationKey string
	TokenHash      string // hex sha256 of the token; "" for none
	KeyID          string
	// WakeAt is the timer deadline as an offset from the database's now
	// (timer: 10m) — or an absolute time (until:), exactly one set when
	// the wait has a timer.
	WakeIn time.Duration
	WakeAt time.Time
	// ExpiresIn is the wait's timeout from the database's now (0 = none);
	// ExpiresAt, when set, is used instead.
	ExpiresIn time.Duration
	ExpiresAt time.Time
	Notify    json.RawMessage // rendered notify request, nil when none
	// Form is an approval wait's form, rendered and scrubbed of secrets
	// (workflow_waits.form_json); nil when the wait has none.
	Form json.RawMessage
	// Job is the job of a job step's wait (kind job): written with the
	// wait, in its transaction, unless the registration consumed the
	// step's result from the inbox. Required for kind job, nil otherwise.
	Job *JobSpec
	// NotifyGrace delays the first maintenance retry of Notify
	// (next_notify_at = database now + NotifyGrace): the registering runner
	// delivers it inline first and records the outcome with MarkNotified, so
	// a retrier must not POST while those tries are in flight. 0 = now.
	NotifyGrace time.Duration
}

// ParkRunParams is commit boundary 3 of a durable wait.
type ParkRunParams struct {
	RunID string
	Lease starflowtype.Lease
}

// GetWaitParams finds one wait by ID or by step instance.
type GetWaitParams struct {
	ID string
	StepKey
}

// ListWaitsParams filters a wait listing; zero values mean any.
type ListWaitsParams struct {
	RunID  string
	Status []starflowtype.WaitStatus
	Limit  int // default 100
}

// WakeWaitParams wakes one wait by token.
type WakeWaitParams struct {
	WaitID    string
	TokenHash string
	RunID     string // when set, the wait must belong to this run
	Payload   json.RawMessage
}

// SignalParams delivers a named signal. Exactly one of RunID and
// CorrelationKey addresses it (both may be set: the run's wait with that
// key).
type SignalParams struct {
	WorkspaceID    string
	RunID          string
	Signal         string
	CorrelationKey string
	Payload        json.RawMessage
}

// SignalResult says where a signal went: the wait it woke, or the inbox
// row that holds it until a wait registers.
type SignalResult struct {
	Wait  *starflowtype.Wait       // nil when it went to the inbox
	Inbox *starflowtype.InboxEntry // nil when it woke a wait
}

// FireDueWaitsParams bounds one poller pass.
type FireDueWaitsParams struct {
	Limit int // default 500
}

// PendingNotifiesParams bounds one notify pass.
type PendingNotifiesParams struct {
	Limit int // default 100
}

// MarkNotifiedParams records one notify try.
type MarkNotifiedParams struct {
	WaitID    string
	Delivered bool
	RetryIn   time.Duration // when not delivered
}

// SessionGetParams reads one session variable.
type SessionGetParams struct {
	WorkspaceID string
	SessionID   string
	Key         string
}

// SessionSetParams writes one session variable.
type SessionSetParams struct {
	WorkspaceID string
	SessionID   string
	Key         string
	Value       json.RawMessage
	// RunID is the origin run, whose lease fences the write. "" is an
	// operator's write (the HTTP API): no fence, origin_run_id NULL, and
	// with KeepUntil and KeepFor zero the variable is kept until deleted.
	RunID string
	Lease starflowtype.Lease
	// KeepUntil keeps the variable until this instant. Zero (and KeepFor
	// zero): dropped when the run ends.
	KeepUntil time.Time
	// KeepFor keeps the variable for this long after the write, measured
	// on the database's clock (keep_until = the database's now + KeepFor,
	// computed by the store in SQL; SPEC §5: time comparisons use the
	// database clock, never the runner's). Used when positive; KeepUntil
	// must then be zero.
	KeepFor time.Duration
}

// DeleteExpiredSessionVarsParams bounds one GC pass.
type DeleteExpiredSessionVarsParams struct {
	Limit int // default 1000
}

// UnimplementedWaiter implements Waiter with ErrNotImplemented; adapters
// embed it until they implement waits.
type UnimplementedWaiter struct{}

func (UnimplementedWaiter) OnRunPaused(context.Context, *RunPausedParams) error {
	return ErrNotImplemented
}
func (UnimplementedWaiter) RegisterWait(context.Context, *RegisterWaitParams) (*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) ParkRun(context.Context, *ParkRunParams) (*starflowtype.Run, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) GetWait(context.Context, *GetWaitParams) (*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) ListWaits(context.Context, *ListWaitsParams) ([]*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) WakeWait(context.Context, *WakeWaitParams) (*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) Signal(context.Context, *SignalParams) (*SignalResult, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) FireDueWaits(context.Context, *FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) PendingNotifies(context.Context, *PendingNotifiesParams) ([]*starflowtype.Wait, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) MarkNotified(context.Context, *MarkNotifiedParams) error {
	return ErrNotImplemented
}
func (UnimplementedWaiter) SessionGet(context.Context, *SessionGetParams) (*starflowtype.SessionVar, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) SessionSet(context.Context, *SessionSetParams) (*starflowtype.SessionVar, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) DeleteExpiredSessionVars(context.Context, *DeleteExpiredSessionVarsParams) (int64, error) {
	return 0, ErrNotImplemented
}
func (UnimplementedWaiter) WakeKeys(context.Context) ([]WakeKey, error) {
	return nil, ErrNotImplemented
}
func (UnimplementedWaiter) AddWakeKey(context.Context, WakeKey) (WakeKey, error) {
	return WakeKey{}, ErrNotImplemented
}

// ErrDurableWaitsNeedStore is what an adapter that keeps nothing (nullstore)
// returns from the Waiter methods that must persist: it wraps
// ErrNotImplemented.
var ErrDurableWaitsNeedStore = fmt.Errorf("durable waits need a durable store (sqlite or postgres): %w", ErrNotImplemented)

// The helpers below are shared by the adapters, so that both dialects
// validate the same way and write the same payloads.

// PausedPayload is the run_paused event payload of p: p.Payload's fields
// (it must be a JSON object, or empty) plus scope_path, step_id and kind.
func PausedPayload(p *RunPausedParams) (json.RawMessage, error) {
	m := map[string]any{}
	if len(p.Payload) > 0 && string(p.Payload) != "null" {
		if err := json.Unmarshal(p.Payload, &m); err != nil {
			return nil, fmt.Errorf("run_paused payload of step %q must be a JSON object: %w", p.StepID, err)
		}
	}
	m["scope_path"], m["step_id"], m["kind"] = p.ScopePath, p.StepID, p.Kind
	return json.Marshal(m)
}

// CheckRegisterWait validates p and returns the signal name the wait is
// stored with: p.Signal, or starflowtype.ChildSignal for a child wait
// registered without one.
func CheckRegisterWait(p *RegisterWaitParams) (string, error) {
	switch p.Kind {
	case starflowtype.WaitSignal, starflowtype.WaitApproval, starflowtype.WaitTimer, starflowtype.WaitChild, starflowtype.WaitJob:
	default:
		return "", fmt.Errorf("step %q: wait kind %q is not signal, timer, approval, child or job", p.StepID, p.Kind)
	}
	if (p.Kind == starflowtype.WaitJob) != (p.Job != nil) {
		return "", fmt.Errorf("step %q: a job wait needs its Job, and only a job wait has one", p.StepID)
	}
	if j := p.Job; j != nil && (j.Type == "" || j.MaxTries < 1 || j.HeartbeatTimeout <= 0 || p.CorrelationKey == "") {
		return "", fmt.Errorf("step %q: a job needs a type, max tries ≥ 1, a positive heartbeat timeout and the step instance as CorrelationKey", p.StepID)
	}
	if p.StepID == "" {
		return "", errors.New("wait: StepID is required")
	}
	signal := p.Signal
	switch p.Kind {
	case starflowtype.WaitJob:
		signal = starflowtype.JobSignal + ":" + p.Job.Type
	case starflowtype.WaitChild:
		if p.CorrelationKey == "" {
			return "", fmt.Errorf("step %q: a child wait needs the child run id as CorrelationKey", p.StepID)
		}
		if signal == "" {
			signal = starflowtype.ChildSignal
		}
	case starflowtype.WaitTimer:
		if p.WakeAt.IsZero() && p.WakeIn <= 0 {
			return "", fmt.Errorf("step %q: a timer wait needs WakeAt or WakeIn", p.StepID)
		}
	}
	if !p.WakeAt.IsZero() && p.WakeIn > 0 {
		return "", fmt.Errorf("step %q: WakeAt and WakeIn are both set; set one", p.StepID)
	}
	if len(p.Notify) > 0 && !json.Valid(p.Notify) {
		return "", fmt.Errorf("step %q: notify request is not valid JSON", p.StepID)
	}
	return signal, nil
}

// CheckSignal validates p: a signal name, and a run id or a correlation
// key to address it; a payload, when given, must be valid JSON.
func CheckSignal(p *SignalParams) error {
	if p.Signal == "" {
		return errors.New("signal name is required")
	}
	if p.RunID == "" && p.CorrelationKey == "" {
		return fmt.Errorf("signal %q: a run id or a correlation key is required", p.Signal)
	}
	if len(p.Payload) > 0 && !json.Valid(p.Payload) {
		return fmt.Errorf("signal %q: payload is not valid JSON", p.Signal)
	}
	return nil
}

// CheckSessionSet validates p: session id, key, a valid JSON value, and
// at most one of KeepUntil and KeepFor (not negative).
func CheckSessionSet(p *SessionSetParams) error {
	if p.SessionID == "" || p.Key == "" {
		return fmt.Errorf("session variable: session id (%q) and key (%q) are required", p.SessionID, p.Key)
	}
	if len(p.Value) == 0 || !json.Valid(p.Value) {
		return fmt.Errorf("session %s key %q: value is not valid JSON", p.SessionID, p.Key)
	}
	if p.KeepFor < 0 || (p.KeepFor > 0 && !p.KeepUntil.IsZero()) {
		return fmt.Errorf("session %s key %q: give either KeepUntil or a positive KeepFor (got %s and %s)", p.SessionID, p.Key, p.KeepUntil.Format(time.RFC3339), p.KeepFor)
	}
	return nil
}

// CheckWakeKey validates k for AddWakeKey: an id of 1 to 64 characters
// and a fingerprint of 64 lowercase hex characters.
func CheckWakeKey(k WakeKey) error {
	if k.ID == "" || len(k.ID) > 64 {
		return fmt.Errorf("wake key %q: the id must be 1 to 64 characters", k.ID)
	}
	if len(k.Fingerprint) != 64 || strings.Trim(k.Fingerprint, "0123456789abcdef") != "" {
		return fmt.Errorf("wake key %s: the fingerprint must be 64 lowercase hex characters (a secret is never stored)", k.ID)
	}
	return nil
}

// WakePayload is the wake_received event payload for wait w completed with
// status by via ("token", "signal", "inbox", "timer", "timeout", "child"):
// {"wait_id", "kind", "status", "via"} and "signal" when the wait has one.
// The wake payload itself is not repeated (it is on the wait row).
func WakePayload(w *starflowtype.Wait, status starflowtype.WaitStatus, via string) json.RawMessage {
	m := map[string]any{"wait_id": w.ID, "kind": w.Kind, "status": status, "via": via}
	if w.Signal != "" {
		m["signal"] = w.Signal
	}
	b, _ := json.Marshal(m)
	return b
}

// ChildPayload is what a child run's end delivers to its parent (the wake
// payload of the parent's child wait, or of its inbox row):
// {"run_id", "status", "output", "error"}; output is null and error ""
// when the run has none. errorJSON is the child's typed error object
// (workflow_runs.error_json): when it has one, the payload also holds it
// as "error_detail" (omitted when errorJSON is nil, JSON null or not
// valid JSON).
func ChildPayload(runID, status string, output json.RawMessage, errText string, errorJSON json.RawMessage) json.RawMessage {
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if string(errorJSON) == "null" || !json.Valid(errorJSON) {
		errorJSON = nil
	}
	b, _ := json.Marshal(struct {
		RunID       string          `json:"run_id"`
		Status      string          `json:"status"`
		Output      json.RawMessage `json:"output"`
		Error       string          `json:"error"`
		ErrorDetail json.RawMessage `json:"error_detail,omitempty"`
	}{runID, status, output, errText, errorJSON})
	return b
}
