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

// DrainOutbox implements state.Outbox. In one transaction it lists the
// runs with unapplied rows, oldest first; claims up to 64 of them with
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
	rows, err := tx.Query(ctx, `SELECT run_id FROM mirror_outbox WHERE applied_at IS NULL
GROUP BY run_id ORDER BY min(id) LIMIT $1`, 4*outboxRunsPerPass)
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

// OutboxStats implements state.Outbox.
func (s *Store) OutboxStats(ctx context.Context, p *state.OutboxStatsParams) (*state.OutboxStats, error) {
	var b strings.Builder
	b.WriteString("SELECT count(*), coalesce(max(age), 0)::float8")
	args := []any{}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	for i, bound := range p.Bounds {
		lo := "true"
		if i > 0 {
			lo = "age >= " + arg(p.Bounds[i-1].Seconds()) + "::float8"
		}
		b.WriteString(", count(*) FILTER (WHERE " + lo + " AND age < " + arg(bound.Seconds()) + "::float8)")
	}
	if n := len(p.Bounds); n > 0 {
		b.WriteString(", count(*) FILTER (WHERE age >= " + arg(p.Bounds[n-1].Seconds()) + "::float8)")
	}
	b.WriteString(` FROM (SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
FROM mirror_outbox WHERE applied_at IS NULL) AS u`)
	st := &state.OutboxStats{}
	var oldest float64
	dest := []any{&st.Pending, &oldest}
	if len(p.Bounds) > 0 {
		st.Buckets = make([]int64, len(p.Bounds)+1)
		for i := range st.Buckets {
			dest = append(dest, &st.Buckets[i])
		}
	}
	if err := s.pool.QueryRow(ctx, b.String(), args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("pgstore: outbox stats: %w", translate(err))
	}
	st.OldestAge = time.Duration(max(oldest, 0) * float64(time.Second))
	return st, nil
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
