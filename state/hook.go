package state

import (
	"context"

	"github.com/starflow/starflow/starflowtype"
)

// HookTx is the open transaction of one adapter write, handed to hooks so
// they can add rows that commit or roll back with it. It offers typed
// operations only (no SQL): the store supplies them for its dialect.
type HookTx interface {
	// StepsOf lists the step rows of a run's attempt whose status is one
	// of statuses, ordered by scope path then step id, at most limit
	// (0 = no limit), as the transaction sees them.
	StepsOf(ctx context.Context, runID string, attempt int, statuses []starflowtype.StepStatus, limit int) ([]*starflowtype.Step, error)
	// BumpMirrorVersion increments workflow_runs.mirror_version and sets
	// mirror_hash = hash when force is set or the stored hash differs.
	// It returns the version after the write and whether it bumped (the
	// run not existing is not bumping).
	BumpMirrorVersion(ctx context.Context, runID, hash string, force bool) (version int64, bumped bool, err error)
	// AppendOutbox inserts mirror_outbox rows (RunID, Kind, Payload,
	// Version; ID and CreatedAt are assigned), their ids ascending in
	// the order given.
	AppendOutbox(ctx context.Context, rows []*OutboxRow) error
}

// Op names the Adapter method that made a Change (its name, e.g.
// OpNodeComplete is "OnNodeComplete"), for hooks that log or test; what a
// write changed is in the Change's fields.
type Op string

// The Ops of Change.
const (
	OpPutDefinition            Op = "PutDefinition"
	OpEnqueueRun               Op = "EnqueueRun"
	OpClaimRun                 Op = "ClaimRun"
	OpRunStart                 Op = "OnRunStart"
	OpRefreshLease             Op = "RefreshLease"
	OpNodeStart                Op = "OnNodeStart"
	OpNodeRetry                Op = "OnNodeRetry"
	OpNodeComplete             Op = "OnNodeComplete"
	OpNodeError                Op = "OnNodeError"
	OpNodeSkipped              Op = "OnNodeSkipped"
	OpRecordPhase              Op = "RecordPhaseIfChanged"
	OpRunComplete              Op = "OnRunComplete"
	OpRunError                 Op = "OnRunError"
	OpRunCancelled             Op = "OnRunCancelled"
	OpClearLease               Op = "ClearLease"
	OpExpireOldLeases          Op = "ExpireOldLeases"
	OpCancelRun                Op = "CancelRun"
	OpRequeueRun               Op = "RequeueRun"
	OpRunPaused                Op = "OnRunPaused"
	OpRegisterWait             Op = "RegisterWait"
	OpParkRun                  Op = "ParkRun"
	OpWakeWait                 Op = "WakeWait"
	OpSignal                   Op = "Signal"
	OpFireDueWaits             Op = "FireDueWaits"
	OpMarkNotified             Op = "MarkNotified"
	OpSessionSet               Op = "SessionSet"
	OpDeleteExpiredSessionVars Op = "DeleteExpiredSessionVars"
	OpAddWakeKey               Op = "AddWakeKey"
	OpSessionDelete            Op = "SessionDelete"
	OpCreateAPIKey             Op = "CreateAPIKey"
	OpRevokeAPIKey             Op = "RevokeAPIKey"
	OpRunnerSeen               Op = "RunnerSeen"
	OpRunnerGone               Op = "RunnerGone"
	OpClaimJob                 Op = "ClaimJob"
	OpHeartbeatJob             Op = "HeartbeatJob"
	OpCompleteJob              Op = "CompleteJob"
	OpFailJob                  Op = "FailJob"
	OpExpireJobLeases          Op = "ExpireJobLeases"
	OpAbandonJob               Op = "AbandonJob"
	OpPauseSchedules           Op = "PauseSchedules"
	OpFireSchedule             Op = "FireSchedule"
)

// EndedAttempt names an attempt whose open step rows (running, waiting) a
// write closed in bulk without listing them in Change.Steps: the lease
// sweep fails them, a cancellation cancels them.
type EndedAttempt struct {
	RunID   string
	Attempt int
}

// Change describes what one adapter write did, as of the end of its
// transaction. Run is the run row after the write (nil for writes that do
// not touch a run, such as PutDefinition); Steps and Events are the rows the
// write upserted or appended.
type Change struct {
	Op    Op // the Adapter method, e.g. OpNodeComplete
	RunID string
	Run   *starflowtype.Run
	// Runs lists every run the write changed when it changed several
	// without being addressed to one (the lease sweep: Run and RunID are
	// then empty, and Runs also holds parents a dead-lettered child's end
	// re-queued); for a write addressed to one run (RunID, Run) it lists
	// the other runs it changed: the parent a child's end woke, the
	// children a cancel cascaded to.
	Runs   []*starflowtype.Run
	Steps  []*starflowtype.Step
	Events []*starflowtype.Event
	// SessionVars are the session variables the write upserted (SessionSet)
	// or removed (a run's end drops its own; DeleteExpiredSessionVars;
	// SessionDelete); a removed one has a nil Value. An operator's write
	// (SessionSet without a run, SessionDelete) has no RunID.
	SessionVars []*starflowtype.SessionVar
	// Waits are the workflow_waits rows the write inserted or changed.
	Waits []*starflowtype.Wait
	// Ended lists the attempts whose open steps the write closed in bulk.
	Ended []EndedAttempt
	// Removed lists the runs the write deleted with every row keyed by
	// them (a retention batch, Retention.CollectGarbage: Op
	// "CollectGarbage", no RunID): the warm tier drops them too.
	Removed []string
}

// TxHook runs inside every write transaction of an adapter that wrote
// something, after the adapter's own writes and before commit. An error
// rolls the write back and is returned by the adapter method (a write the
// store committed together with others' rolls back alone).
//
// This is the seam through which the mirror adapter appends mirror_outbox
// rows in the same transaction as the cold write they mirror (SPEC §8).
type TxHook func(ctx context.Context, tx HookTx, ch *Change) error
