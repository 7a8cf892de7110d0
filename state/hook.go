package state

import (
	"context"
	"database/sql"

	"github.com/starflow/starflow/starflowtype"
)

// Tx is the open transaction of one adapter write, handed to hooks so they
// can add rows that commit or roll back with it. *sql.Tx satisfies it.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Change describes what one adapter write did, as of the end of its
// transaction. Run is the run row after the write (nil for writes that do
// not touch a run, such as PutDefinition); Steps and Events are the rows the
// write upserted or appended.
type Change struct {
	Op     string // the Adapter method, e.g. "OnNodeComplete"
	RunID  string
	Run    *starflowtype.Run
	Steps  []*starflowtype.Step
	Events []*starflowtype.Event
}

// TxHook runs inside every write transaction of an adapter, after the
// adapter's own writes and before commit. An error rolls the whole
// transaction back and is returned by the adapter method. Dialect is the
// adapter's Capabilities().Dialect, so a hook can write SQL that fits.
//
// This is the seam through which the mirror adapter appends mirror_outbox
// rows in the same transaction as the cold write they mirror (SPEC §8).
type TxHook func(ctx context.Context, tx Tx, dialect string, ch *Change) error
