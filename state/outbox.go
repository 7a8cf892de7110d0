package state

import (
	"context"
	"encoding/json"
	"time"
)

// Outbox kinds (mirror_outbox.kind, Appendix A).
const (
	OutboxKindRun        = "run"
	OutboxKindStep       = "step"
	OutboxKindEvent      = "event"
	OutboxKindSessionVar = "session_var"
)

// OutboxRow is one mirror_outbox row. RunID is "" for rows that belong to
// no run (session-variable GC). Version is the run's cold version
// (workflow_runs.mirror_version) as of the write that appended the row.
type OutboxRow struct {
	ID        int64
	RunID     string
	Kind      string
	Payload   json.RawMessage
	Version   int64
	CreatedAt time.Time
}

// OutboxApplyFunc applies a batch of unapplied rows (in id order; a run's
// rows in the order they were written) to the warm tier and returns the
// ids it applied. On an error it returns the ids applied before it; those
// are marked applied and the rest stay unapplied for the next pass.
type OutboxApplyFunc func(ctx context.Context, rows []*OutboxRow) (applied []int64, err error)

// Outbox is the mirror's access to mirror_outbox, implemented by the SQL
// adapters (sqlitestore, pgstore) beside Adapter. The rows themselves are
// written by the mirror's TxHook inside each cold write's transaction.
type Outbox interface {
	// DrainOutbox takes up to p.Limit unapplied rows in id order, calls
	// apply with them and sets applied_at (database clock) on the ids it
	// returns. Returns how many rows were marked applied, and apply's
	// error, if any, after marking what it applied.
	//
	// PostgreSQL: safe with several drainers. A drainer claims whole runs
	// (a transaction-scoped advisory lock per run), so a run's rows are
	// applied by one drainer at a time, in order; the transaction stays
	// open while apply runs. SQLite: one pass at a time across every
	// process and Store sharing the file (a lease row in
	// mirror_drain_lock, renewed while apply runs and expiring 15 s after
	// a holder died; a pass that finds it held drains nothing and returns
	// 0, nil); apply runs outside any write transaction, so the single
	// writer is never held during warm-store I/O.
	DrainOutbox(ctx context.Context, p *DrainOutboxParams, apply OutboxApplyFunc) (int, error)
	// PruneOutbox deletes up to p.Limit rows applied more than p.OlderThan
	// ago (database clock). Returns how many.
	PruneOutbox(ctx context.Context, p *PruneOutboxParams) (int64, error)
	// OutboxStats counts the unapplied rows by age (database clock); an
	// adapter may estimate a large backlog (OutboxStats.Estimated).
	OutboxStats(ctx context.Context, p *OutboxStatsParams) (*OutboxStats, error)
	// MirrorRuns lists the runs the drift sweep checks with their cold
	// version and unapplied row count: with p.RunIDs, exactly those that
	// exist; otherwise every run that is not terminal or finished within
	// p.FinishedWithin (database clock), ordered by id after p.AfterID,
	// at most p.Limit.
	MirrorRuns(ctx context.Context, p *MirrorRunsParams) ([]*MirrorRun, error)
}

// DrainOutboxParams bounds one drain pass.
type DrainOutboxParams struct {
	// Limit bounds the rows of one pass. Default 500.
	Limit int
}

// PruneOutboxParams bounds one prune pass.
type PruneOutboxParams struct {
	OlderThan time.Duration // applied at least this long ago
	Limit     int           // default 10000
}

// OutboxStatsParams gives the age buckets of OutboxStats.
type OutboxStatsParams struct {
	// Bounds are the upper bounds of the age buckets, ascending; a last
	// bucket holds the rows older than the last bound.
	Bounds []time.Duration
}

// OutboxStats describes the unapplied rows of mirror_outbox.
type OutboxStats struct {
	// Pending is the number of unapplied rows.
	Pending int64
	// Buckets[i] counts the unapplied rows whose age is below Bounds[i]
	// and at least Bounds[i-1]; the last element (len(Bounds)) counts
	// those at least Bounds[len-1] old.
	Buckets []int64
	// OldestAge is the age of the oldest unapplied row (0 when none).
	OldestAge time.Duration
	// Estimated is set when Pending and Buckets are estimates: an adapter
	// may bound the rows it counts (pgstore reads at most
	// pgstore.OutboxStatsExact of them) and estimate a larger backlog.
	// OldestAge is exact.
	Estimated bool
}

// MirrorRunsParams selects the runs of a drift-sweep page.
type MirrorRunsParams struct {
	RunIDs         []string
	FinishedWithin time.Duration
	AfterID        string
	Limit          int // default 500
}

// MirrorRun is one run's mirror state in the cold tier.
type MirrorRun struct {
	RunID   string
	Version int64 // workflow_runs.mirror_version
	Pending int64 // unapplied mirror_outbox rows of the run
}

// OutboxDefaultLimit and PruneDefaultLimit are the default batch sizes.
const (
	OutboxDefaultLimit = 500
	PruneDefaultLimit  = 10000
)
