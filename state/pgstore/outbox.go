package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state"
)

var _ state.Outbox = (*Store)(nil)

// outboxLockClass is the first key of the transaction-scoped advisory
// locks by which a drainer claims a run's outbox rows ("mirr").
const outboxLockClass = 0x6d697272

// outboxRunsPerPass bounds the runs one drain pass claims, so that several
// drainers share a backlog of many runs.
const outboxRunsPerPass = 64

// outboxCandidateWindow is the least number of the oldest unapplied rows
// among whose runs a drain pass looks for runs to claim.
const outboxCandidateWindow = 4 * outboxRunsPerPass

// outboxCandidatesSQL lists the runs of the $1 oldest unapplied rows,
// oldest first, at most $2: a walk of the partial index
// mirror_outbox_unapplied bounded by $1, whatever the backlog.
const outboxCandidatesSQL = `SELECT run_id FROM (
SELECT id, run_id FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT $1) AS oldest
GROUP BY run_id ORDER BY min(id) LIMIT $2`

// DrainOutbox implements state.Outbox. In one transaction it lists the
// runs of the oldest unapplied rows (the first max(p.Limit, 256) of them
// in id order, so a pass costs the same whatever the backlog), oldest
// first; claims up to 64 of them with
// pg_try_advisory_xact_lock (class "mirr", key hashtext(schema:run_id)),
// skipping those another drainer holds; reads their unapplied rows in id
// order; calls apply; marks the applied ids; commits, which releases the
// claims. A run is thus drained by one drainer at a time, in id order,
// and a run's ids follow its commit order (the mirror hook updates the
// run row before it inserts). The transaction is open while apply runs:
// bound apply with ctx.
func (s *Store) DrainOutbox(ctx context.Context, p *state.DrainOutboxParams, apply state.OutboxApplyFunc) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.OutboxDefaultLimit
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: begin: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var candidates []string
	rows, err := tx.Query(ctx, outboxCandidatesSQL, max(limit, outboxCandidateWindow), 4*outboxRunsPerPass)
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: runs: %w", translate(err))
	}
	candidates, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: runs: %w", translate(err))
	}
	if len(candidates) == 0 {
		return 0, nil
	}
	// No ORDER BY: the function scan yields the array in order and LIMIT
	// stops it, so no lock is taken beyond the runs returned.
	rows, err = tx.Query(ctx, `SELECT r FROM unnest($1::text[]) AS r
WHERE pg_try_advisory_xact_lock($2, hashtext(current_schema() || ':' || r)) LIMIT $3`,
		candidates, outboxLockClass, outboxRunsPerPass)
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: claim runs: %w", translate(err))
	}
	claimed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: claim runs: %w", translate(err))
	}
	if len(claimed) == 0 {
		return 0, nil
	}
	rows, err = tx.Query(ctx, `SELECT id, run_id, kind, payload::text, version, created_at FROM mirror_outbox
WHERE applied_at IS NULL AND run_id = ANY($1) ORDER BY id LIMIT $2`, claimed, limit)
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: rows: %w", translate(err))
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*state.OutboxRow, error) {
		o := &state.OutboxRow{}
		var payload string
		err := r.Scan(&o.ID, &o.RunID, &o.Kind, &payload, &o.Version, &o.CreatedAt)
		o.Payload, o.CreatedAt = []byte(payload), o.CreatedAt.UTC()
		return o, err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: drain outbox: rows: %w", translate(err))
	}
	if len(batch) == 0 {
		return 0, nil
	}
	applied, aerr := apply(ctx, batch)
	if len(applied) > 0 {
		// Marking must survive a cancelled ctx: what was applied is applied.
		mctx := context.WithoutCancel(ctx)
		if _, err := tx.Exec(mctx, `UPDATE mirror_outbox SET applied_at = clock_timestamp() WHERE id = ANY($1)`, applied); err != nil {
			return 0, fmt.Errorf("pgstore: mark outbox rows applied: %w", translate(err))
		}
		if err := tx.Commit(mctx); err != nil {
			return 0, fmt.Errorf("pgstore: mark outbox rows applied: commit: %w", translate(err))
		}
	}
	return len(applied), aerr
}

// PruneOutbox implements state.Outbox.
func (s *Store) PruneOutbox(ctx context.Context, p *state.PruneOutboxParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.PruneDefaultLimit
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM mirror_outbox WHERE id IN (
SELECT id FROM mirror_outbox WHERE applied_at IS NOT NULL
AND applied_at < now() - make_interval(secs => $1) LIMIT $2)`, p.OlderThan.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("pgstore: prune outbox: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}

// OutboxStatsExact is the number of unapplied rows OutboxStats reads:
// up to it, the counts are exact; beyond, estimated (OutboxStats.Estimated).
const OutboxStatsExact = 10000

// OutboxStats implements state.Outbox with a bounded cost: it reads the
// newest OutboxStatsExact unapplied rows and the oldest one, through the
// partial index mirror_outbox_unapplied. When there are fewer, every count
// is exact. Otherwise Pending is estimated from the id span of the
// unapplied rows (an upper bound: rows applied out of order and ids lost
// to rolled-back inserts count too), the rows beyond the ones read are
// counted in the bucket of the oldest row's age, and Estimated is set;
// OldestAge is exact either way.
func (s *Store) OutboxStats(ctx context.Context, p *state.OutboxStatsParams) (*state.OutboxStats, error) {
	query, args := outboxStatsQuery(p.Bounds)
	var (
		n, lowID, highID    int64
		windowOld, firstAge float64
		buckets             = make([]int64, len(p.Bounds)+1)
	)
	dest := []any{&n, &windowOld, &highID, &lowID, &firstAge}
	for i := range buckets {
		dest = append(dest, &buckets[i])
	}
	if err := s.pool.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("pgstore: outbox stats: %w", translate(err))
	}
	st := &state.OutboxStats{Pending: n}
	oldest := max(windowOld, firstAge, 0)
	if n >= OutboxStatsExact {
		st.Estimated = true
		st.Pending = max(n, highID-lowID+1)
		i := 0
		for i < len(p.Bounds) && oldest >= p.Bounds[i].Seconds() {
			i++
		}
		buckets[i] += st.Pending - n
	}
	if len(p.Bounds) > 0 {
		st.Buckets = buckets
	}
	st.OldestAge = time.Duration(oldest * float64(time.Second))
	return st, nil
}

// outboxStatsQuery is OutboxStats' query for bounds: window count, the
// window's oldest age, the highest unapplied id, the lowest and its age,
// then the len(bounds)+1 bucket counts of the window.
func outboxStatsQuery(bounds []time.Duration) (string, []any) {
	var b strings.Builder
	args := []any{OutboxStatsExact}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	b.WriteString(`WITH newest AS (
SELECT id, extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id DESC LIMIT $1),
oldest AS (
SELECT id, extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT 1)
SELECT count(*), coalesce(max(newest.age), 0)::float8, coalesce(max(newest.id), 0),
coalesce((SELECT id FROM oldest), 0), coalesce((SELECT age FROM oldest), 0)::float8`)
	for i, bound := range bounds {
		lo := "true"
		if i > 0 {
			lo = "age >= " + arg(bounds[i-1].Seconds()) + "::float8"
		}
		b.WriteString(", count(*) FILTER (WHERE " + lo + " AND age < " + arg(bound.Seconds()) + "::float8)")
	}
	if n := len(bounds); n > 0 {
		b.WriteString(", count(*) FILTER (WHERE age >= " + arg(bounds[n-1].Seconds()) + "::float8)")
	} else {
		b.WriteString(", count(*)")
	}
	b.WriteString(" FROM newest")
	return b.String(), args
}

// MirrorRuns implements state.Outbox.
func (s *Store) MirrorRuns(ctx context.Context, p *state.MirrorRunsParams) ([]*state.MirrorRun, error) {
	const cols = `SELECT r.id::text, r.mirror_version,
(SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id::text) FROM workflow_runs r `
	var (
		rows pgx.Rows
		err  error
	)
	if p.RunIDs != nil {
		ids := make([]string, 0, len(p.RunIDs))
		for _, id := range p.RunIDs {
			if c, err := canonicalUUID(id); err == nil {
				ids = append(ids, c)
			}
		}
		rows, err = s.pool.Query(ctx, cols+`WHERE r.id = ANY($1::uuid[]) ORDER BY r.id`, ids)
	} else {
		limit := p.Limit
		if limit <= 0 {
			limit = state.OutboxDefaultLimit
		}
		after := "00000000-0000-0000-0000-000000000000"
		if c, err := canonicalUUID(p.AfterID); err == nil {
			after = c
		}
		rows, err = s.pool.Query(ctx, cols+`WHERE (r.status NOT IN ('succeeded', 'failed', 'cancelled')
OR coalesce(r.completed_at, r.updated_at) >= now() - make_interval(secs => $1))
AND r.id > $2::uuid ORDER BY r.id LIMIT $3`, p.FinishedWithin.Seconds(), after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: mirror runs: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*state.MirrorRun, error) {
		m := &state.MirrorRun{}
		return m, r.Scan(&m.RunID, &m.Version, &m.Pending)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: mirror runs: %w", translate(err))
	}
	return out, nil
}
