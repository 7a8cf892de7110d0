package state

import (
	"context"
	"time"
)

// Retention is the garbage collection of the cold tier (issue 16): what
// is older than the configured ages goes, in small batches, each batch
// one short transaction. Every Adapter implements it. Ages are measured
// on the database clock.
type Retention interface {
	// CollectGarbage removes (or, with p.DryRun, counts) what is due:
	//
	//   - ended runs past their age, each with everything keyed by it
	//     (steps, events, checkpoints, waits, wake-inbox rows, worker
	//     jobs, idempotency receipts): succeeded runs after p.Succeeded,
	//     failed (not dead-lettered) and cancelled runs after p.Failed,
	//     runs held for an operator (interrupted in recovery mode manual,
	//     and dead-lettered ones) after p.Held; the age of a run is the
	//     time since it ended (completed_at; for a held run, since its
	//     last change). The current revision of a workflow whose
	//     definition has a `retention` field overrides Succeeded and
	//     Failed for the runs of that workflow name in that workspace.
	//     A run that has not ended is never removed. A child run
	//     (parent_run_id) goes only with its parent: a run goes together
	//     with all its descendants, judged by its own status and age, and
	//     only when every descendant has ended;
	//   - blobs no checkpoint references any more, untouched for
	//     p.BlobGrace (a blob a concurrent transaction is writing is never
	//     taken);
	//   - consumed waits (not pending) past p.Consumed whose step instance
	//     no longer needs them: their run ended, their attempt is not the
	//     run's current one, or their step instance succeeded; consumed
	//     wake-inbox rows past p.Consumed;
	//   - mirror_outbox rows applied more than p.OutboxApplied ago (the
	//     query of Outbox.PruneOutbox);
	//   - expired idempotency receipts;
	//   - with p.SessionVars, expired session variables (as
	//     Waiter.DeleteExpiredSessionVars, hooks included).
	//
	// The hooks run in each batch that removes runs, with the removed
	// runs (descendants included) in Change.Removed, so a mirror drops
	// them from the warm tier in the same transaction's outbox rows.
	//
	// Rows another transaction holds are skipped (PostgreSQL: SKIP
	// LOCKED) and taken by a later pass. With p.DryRun every batch is
	// rolled back: the report says what would go and nothing is removed
	// (blobs only the removed runs reference are counted when a batch's
	// runs were the last to reference them). On error the report holds
	// what the batches committed before it.
	CollectGarbage(ctx context.Context, p *GCParams) (GCReport, error)
}

// Retention defaults (GCParams).
const (
	RetainSucceededDefault = 7 * 24 * time.Hour
	RetainFailedDefault    = 30 * 24 * time.Hour
	RetainHeldDefault      = 90 * 24 * time.Hour
	RetainConsumedDefault  = 7 * 24 * time.Hour
	BlobGraceDefault       = time.Hour
	OutboxAppliedDefault   = time.Hour
	GCBatchDefault         = 500
	// RetainForever, as an age, keeps the rows of that kind forever.
	RetainForever time.Duration = -1
)

// GCParams configures one CollectGarbage call. A zero age takes its
// default; RetainForever (any negative age) keeps that kind forever.
type GCParams struct {
	// Succeeded: succeeded runs. Default 7 days.
	Succeeded time.Duration
	// Failed: failed runs that are not dead-lettered, and cancelled runs.
	// Default 30 days.
	Failed time.Duration
	// Held: runs waiting for an operator — interrupted in recovery mode
	// manual (claim_state abandoned) and dead-lettered — counted from
	// their last change. Default 90 days. A definition's retention does
	// not override it.
	Held time.Duration
	// Consumed: consumed waits and wake-inbox rows of runs that stay.
	// Default 7 days.
	Consumed time.Duration
	// BlobGrace: an orphan blob goes only when it was neither created nor
	// written again for this long. Default 1 h.
	BlobGrace time.Duration
	// OutboxApplied: applied mirror_outbox rows. Default 1 h (the mirror's
	// own prune, mirror.Config.Retention, has the same default).
	OutboxApplied time.Duration
	// SessionVars also removes expired session variables.
	SessionVars bool
	// Batch bounds the runs (and the rows of every other kind) one
	// transaction removes. Default 500.
	Batch int
	// DryRun counts instead of removing: every batch is rolled back.
	DryRun bool
	// Throttle makes the pass wait Throttle × the time each batch took
	// after it, leaving the database to the runners meanwhile (1: gc uses
	// at most half of one connection's time). 0 or negative: no wait.
	// Default 0.
	Throttle float64
}

// WithDefaults returns a copy of p with zero fields set to their defaults.
func (p GCParams) WithDefaults() GCParams {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&p.Succeeded, RetainSucceededDefault)
	def(&p.Failed, RetainFailedDefault)
	def(&p.Held, RetainHeldDefault)
	def(&p.Consumed, RetainConsumedDefault)
	def(&p.BlobGrace, BlobGraceDefault)
	def(&p.OutboxApplied, OutboxAppliedDefault)
	if p.Batch <= 0 {
		p.Batch = GCBatchDefault
	}
	return p
}

// GCReport counts the rows CollectGarbage removed (or, in a dry run,
// would remove), by kind. Runs counts every run removed, children too.
type GCReport struct {
	Runs        int64 `json:"runs"`
	Steps       int64 `json:"steps"`
	Events      int64 `json:"events"`
	Checkpoints int64 `json:"checkpoints"`
	Waits       int64 `json:"waits"`
	InboxRows   int64 `json:"inbox_rows"`
	WorkerJobs  int64 `json:"worker_jobs"`
	Blobs       int64 `json:"blobs"`
	OutboxRows  int64 `json:"outbox_rows"`
	Receipts    int64 `json:"receipts"`
	SessionVars int64 `json:"session_vars"`
}

// Add adds o's counts to r.
func (r *GCReport) Add(o GCReport) {
	r.Runs += o.Runs
	r.Steps += o.Steps
	r.Events += o.Events
	r.Checkpoints += o.Checkpoints
	r.Waits += o.Waits
	r.InboxRows += o.InboxRows
	r.WorkerJobs += o.WorkerJobs
	r.Blobs += o.Blobs
	r.OutboxRows += o.OutboxRows
	r.Receipts += o.Receipts
	r.SessionVars += o.SessionVars
}

// Total is the sum of every count.
func (r GCReport) Total() int64 {
	return r.Runs + r.Steps + r.Events + r.Checkpoints + r.Waits + r.InboxRows + r.WorkerJobs + r.Blobs +
		r.OutboxRows + r.Receipts + r.SessionVars
}

// Kinds lists the counts by kind name (the names the CLI prints), in a
// fixed order.
func (r GCReport) Kinds() []GCKind {
	return []GCKind{{"runs", r.Runs}, {"steps", r.Steps}, {"events", r.Events}, {"checkpoints", r.Checkpoints},
		{"waits", r.Waits}, {"inbox_rows", r.InboxRows}, {"worker_jobs", r.WorkerJobs}, {"blobs", r.Blobs},
		{"outbox_rows", r.OutboxRows}, {"receipts", r.Receipts}, {"session_vars", r.SessionVars}}
}

// GCKind is one kind's count in a GCReport.
type GCKind struct {
	Name  string
	Count int64
}
