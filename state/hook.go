package state

import (
	"context"

	"github.com/starflow/starflow/starflowtype"
)

// Tx is the open transaction of one adapter write, handed to hooks so they
// can add rows that commit or roll back with it. It is driver-neutral:
// SQLite adapts a *sql.Tx, PostgreSQL a pgx.Tx. Placeholders are the
// dialect's own ("?" on SQLite, "$1" on PostgreSQL).
type Tx interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query returning rows; the caller closes them.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow runs a query expected to return at most one row; Scan
	// returns ErrNoRows (of the driver) when there is none.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is one result row.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Change describes what one adapter write did, as of the end of its
// transaction. Run is the run row after the write (nil for writes that do
// not touch a run, such as PutDefinition); Steps and Events are the rows the
// write upserted or appended.
type Change struct {
	Op    string // the Adapter method, e.g. "OnNodeComplete"
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
	// or removed (a run's end drops its own; DeleteExpiredSessionVars);
	// a removed one has a nil Value.
	SessionVars []*starflowtype.SessionVar
	// Waits are the workflow_waits rows the write inserted or changed.
	Waits []*starflowtype.Wait
}

// TxHook runs inside every write transaction of an adapter that wrote
// something, after the adapter's own writes and before commit. An error
// rolls the whole transaction back and is returned by the adapter method.
// Dialect is the adapter's Capabilities().Dialect, so a hook can write SQL
// that fits.
//
// This is the seam through which the mirror adapter appends mirror_outbox
// rows in the same transaction as the cold write they mirror (SPEC §8).
type TxHook func(ctx context.Context, tx Tx, dialect string, ch *Change) error
