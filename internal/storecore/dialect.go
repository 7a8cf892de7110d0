package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Dialect is what one SQL database supplies to the core: connections, the
// text of every named query, and conversions of values to and from its
// types. It holds no logic of the store; every query the core names must
// exist in the dialect (TestQueriesExist checks both dialects).
//
// Queries are named, not written inline: the core runs "fence" with
// runID, runner, epoch and the dialect's text for "fence" runs with the
// arguments converted to its types. Arguments the core passes: string,
// int, int64, bool, float64, []byte, time.Time (an instant), nil, and the
// two that Arg converts: time.Duration (an offset from the database's now:
// PostgreSQL binds microseconds, SQLite a strftime modifier) and []string,
// []int64, []float64 (PostgreSQL arrays, SQLite JSON arrays read with
// json_each). JSON values arrive as text (nil is NULL). Scan destinations:
// *string, *int, *int64, *bool, *float64, *[]byte (JSON too; NULL is nil)
// and *time.Time, which TimeHolder fills (NULL is the zero time, read as
// UTC). A query's arguments are numbered in the order the core passes them
// ($1… on PostgreSQL, ?1… on SQLite).
type Dialect interface {
	// Name is Capabilities().Dialect: "sqlite" or "postgres". Faultpoint
	// names start with it.
	Name() string
	// Queries are the dialect's statements by name.
	Queries() map[string]string
	// Begin opens a write transaction.
	Begin(ctx context.Context, opts TxOptions) (Conn, error)
	// Reader runs reads outside any write transaction.
	Reader() Conn
	// SingleWriter reports that the database takes one writer at a time
	// (SQLite): the core then runs every write through its group
	// committer, each in a savepoint of a shared transaction.
	SingleWriter() bool
	// Arg converts an argument the driver cannot bind as it is (see above).
	Arg(v any) any
	// TimeHolder returns a scan destination for a time column and the
	// function that reads the time out of it after the scan.
	TimeHolder() (holder any, get func() time.Time)
	// TimePrecision is the resolution of the times the database stores
	// and binds (PostgreSQL: a microsecond; SQLite: a millisecond). A
	// bound time is cut to it, so a bound the core must apply exactly to
	// the stored values (ListRuns' instants) is first rounded up to it.
	TimePrecision() time.Duration
	// Translate maps a driver error to the core's: ErrNoRows for a query
	// that returned no row, an error wrapping starflowtype.ErrConflict for
	// a unique violation, else err.
	Translate(err error) error
	// Retryable reports whether a transaction that failed with err may
	// be run again from the start (a PostgreSQL deadlock victim).
	Retryable(err error) bool
	// Notify makes tx wake the idle runners of pools when it commits
	// (PostgreSQL: pg_notify); a dialect whose runners are woken in the
	// process does nothing.
	Notify(ctx context.Context, tx Conn, pools []string) error
	// Lock takes a lock named key for the rest of tx (PostgreSQL: a
	// transaction advisory lock); a single-writer dialect does nothing.
	Lock(ctx context.Context, tx Conn, key string) error
	// Close releases the connections.
	Close() error
}

// TxOptions tune one write transaction.
type TxOptions struct {
	// LockTimeout bounds each lock wait of the transaction (PostgreSQL:
	// SET LOCAL lock_timeout); 0 is the database's default.
	LockTimeout time.Duration
	// ByKey says that every statement of the transaction reaches the
	// rows it reads by their keys, so no plan should scan a whole table
	// (PostgreSQL: SET LOCAL enable_seqscan = off). A generic plan made
	// while a table held a page or two would scan it otherwise, and keeps
	// doing so as the table grows until the next ANALYZE replans it.
	ByKey bool
}

// Conn runs SQL text on a driver: a pool, or an open transaction (which
// Commit and Rollback end; a pool's are never called).
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Row is one result row.
type Row interface{ Scan(dest ...any) error }

// Rows is a result set.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// ErrNoRows is what Row.Scan returns when the query returned no row.
var ErrNoRows = errors.New("storecore: no rows")

// StepBatcher is an optional ability of a Dialect: executing many fenced
// step writes in one round trip (PostgreSQL: one statement each, chained
// with data-modifying CTEs, sent in one pipeline). Without it the core
// executes each write with its named queries, one statement at a time.
//
// StepWrites executes ws inside tx in order and fills in each write's
// result fields. A write whose fence matches no row, whose run has a
// cancel request it must refuse, or whose step statement changes no row
// writes nothing; an error means tx is unusable.
type StepBatcher interface {
	StepWrites(ctx context.Context, tx Conn, ws []*StepWrite) error
}

// StepOp is what a step write does to its step row (workflow_steps).
type StepOp int

// The step writes (state.Adapter's OnNode* methods).
const (
	// StepStart opens the row for try Try (status running), unless it
	// succeeded or already started that try or a later one.
	StepStart StepOp = iota
	// StepRetry records a failed try on a running row (tries, error).
	StepRetry
	// StepSucceed closes an open (running or waiting) row as succeeded.
	StepSucceed
	// StepStartSucceed writes a step's start and success at once (a step
	// without external side effects): the row becomes succeeded with
	// tries Try, unless it succeeded or started that try or a later one.
	StepStartSucceed
	// StepFail closes an open row as failed (cancelled, with
	// StepWrite.Cancelled), or writes such a row when none is open,
	// unless it succeeded.
	StepFail
	// StepSkip marks the row skipped unless it succeeded or is skipped.
	StepSkip
)

// StepWrite is one fenced step write, described for a dialect to run:
// fence the run (workflow_runs id, leased_by, lease_epoch, claim_state
// claimed or running); unless RefuseCancelled and the run has
// cancel_requested, apply Op to the step row; when the step row changed,
// insert Blobs, append Events in order and write Checkpoint.
type StepWrite struct {
	Op    StepOp
	Key   state.StepKey
	Lease starflowtype.Lease
	Kind  string
	Try   int
	Error string // StepRetry, StepFail
	// Cancelled makes StepFail write the row as cancelled instead of
	// failed (FailStatus); every other column as for a failure.
	Cancelled bool
	// RefuseCancelled refuses the write when the run has
	// cancel_requested (an operator's cancel of the whole run): a step
	// start's. It is about the run, never about a step row's status: a
	// row written cancelled (Cancelled) is started again by a later try
	// as a failed one is.
	RefuseCancelled bool
	Events          []EventIn
	Blobs           []Blob
	Checkpoint      *CheckpointIn
	// WantRun asks for the whole run row as the write leaves it, the step
	// row and the events' ids (hooks need them); otherwise only the run's
	// workspace, env and attempt are read.
	WantRun bool

	// Results, filled in by the executor.

	Fenced bool // the fence matched
	Cancel bool // cancel_requested was set (with RefuseCancelled: nothing else written)
	// Run is the run row after the fence (WantRun), or a run holding only
	// WorkspaceID, Env and Attempt.
	Run *starflowtype.Run
	// Changed reports that the step statement changed the row; Step is
	// the row as written (with WantRun; the executor may leave it nil
	// otherwise).
	Changed bool
	Step    *starflowtype.Step
	// Prior is the step row's status before the write ("" when there was
	// none), for StepSkip's "already skipped".
	Prior starflowtype.StepStatus
	// EventIDs and EventsAt are the appended events' ids (in Events
	// order) and their created_at (with WantRun; the executor may leave
	// them unset otherwise).
	EventIDs []int64
	EventsAt time.Time
}

// FailStatus is the status StepFail leaves the row in: cancelled with
// Cancelled, else failed.
func (w *StepWrite) FailStatus() starflowtype.StepStatus {
	if w.Cancelled {
		return starflowtype.StepCancelled
	}
	return starflowtype.StepFailed
}

// EventIn is an event a write appends.
type EventIn struct {
	Type    starflowtype.EventType
	Payload json.RawMessage
}

// Blob is a workflow_blobs row (inserted unless its sha256 exists).
type Blob struct {
	Sum  string
	Data []byte
}

// CheckpointIn is a workflow_run_checkpoints row's values: the JSON columns
// as stored (the value, or a blob's placeholder) and the blob columns (the
// sha256, or "" when the value is inline).
type CheckpointIn struct {
	Context, Output         []byte
	ContextBlob, OutputBlob string
}
