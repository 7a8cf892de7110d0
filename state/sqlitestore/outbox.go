package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/starflow/starflow/state"
)

var _ state.Outbox = (*Store)(nil)

// drainLocks holds one mutex per Store: SQLite drains one pass at a time
// per process (state.Outbox).
var drainLocks sync.Map // *Store → *sync.Mutex

const sqliteNow = `strftime('%Y-%m-%dT%H:%M:%fZ','now')`

// DrainOutbox implements state.Outbox. The rows are read from the reader
// pool and apply runs outside any transaction, so the single writer is
// never held during warm-store I/O; the applied ids are then marked in one
// short write. Passes of one Store are serialised; run one drainer per
// database file.
func (s *Store) DrainOutbox(ctx context.Context, p *state.DrainOutboxParams, apply state.OutboxApplyFunc) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.OutboxDefaultLimit
	}
	mu, _ := drainLocks.LoadOrStore(s, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	rows, err := s.read.QueryContext(ctx, `SELECT id, run_id, kind, payload, version, created_at
FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: drain outbox: %w", err)
	}
	var batch []*state.OutboxRow
	for rows.Next() {
		r := &state.OutboxRow{}
		var payload, created string
		if err := rows.Scan(&r.ID, &r.RunID, &r.Kind, &payload, &r.Version, &created); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlitestore: drain outbox: %w", err)
		}
		r.Payload, r.CreatedAt = json.RawMessage(payload), parseTime(created)
		batch = append(batch, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqlitestore: drain outbox: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	applied, aerr := apply(ctx, batch)
	if len(applied) > 0 {
		ids, _ := json.Marshal(applied)
		// Marking must survive a cancelled ctx: what was applied is applied.
		_, err := s.write.ExecContext(context.WithoutCancel(ctx),
			`UPDATE mirror_outbox SET applied_at = `+sqliteNow+` WHERE id IN (SELECT value FROM json_each(?))`, string(ids))
		if err != nil {
			return 0, fmt.Errorf("sqlitestore: mark outbox rows applied: %w", translate(err))
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
	res, err := s.write.ExecContext(ctx, `DELETE FROM mirror_outbox WHERE id IN (
SELECT id FROM mirror_outbox WHERE applied_at IS NOT NULL
AND applied_at < strftime('%Y-%m-%dT%H:%M:%fZ','now', ?) LIMIT ?)`, modifier(-p.OlderThan), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: prune outbox: %w", translate(err))
	}
	return res.RowsAffected()
}

// modifier is a SQLite date modifier adding d ("+1.500 seconds").
func modifier(d time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", d.Seconds())
}

// OutboxStats implements state.Outbox.
func (s *Store) OutboxStats(ctx context.Context, p *state.OutboxStatsParams) (*state.OutboxStats, error) {
	var b strings.Builder
	b.WriteString("SELECT count(*), coalesce(max(age), 0)")
	args := []any{}
	for i, bound := range p.Bounds {
		lo := "1"
		if i > 0 {
			lo = "age >= ?"
			args = append(args, p.Bounds[i-1].Seconds())
		}
		b.WriteString(", coalesce(sum(CASE WHEN " + lo + " AND age < ? THEN 1 ELSE 0 END), 0)")
		args = append(args, bound.Seconds())
	}
	if n := len(p.Bounds); n > 0 {
		b.WriteString(", coalesce(sum(CASE WHEN age >= ? THEN 1 ELSE 0 END), 0)")
		args = append(args, p.Bounds[n-1].Seconds())
	}
	b.WriteString(` FROM (SELECT (julianday('now') - julianday(created_at)) * 86400.0 AS age
FROM mirror_outbox WHERE applied_at IS NULL)`)
	st := &state.OutboxStats{Buckets: make([]int64, len(p.Bounds)+1)}
	var oldest float64
	dest := []any{&st.Pending, &oldest}
	for i := range p.Bounds {
		dest = append(dest, &st.Buckets[i])
	}
	if len(p.Bounds) > 0 {
		dest = append(dest, &st.Buckets[len(p.Bounds)])
	} else {
		st.Buckets = nil
	}
	if err := s.read.QueryRowContext(ctx, b.String(), args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("sqlitestore: outbox stats: %w", err)
	}
	st.OldestAge = time.Duration(max(oldest, 0) * float64(time.Second))
	return st, nil
}

// MirrorRuns implements state.Outbox.
func (s *Store) MirrorRuns(ctx context.Context, p *state.MirrorRunsParams) ([]*state.MirrorRun, error) {
	const cols = `SELECT r.id, r.mirror_version,
(SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id) FROM workflow_runs r `
	var (
		query string
		args  []any
	)
	if p.RunIDs != nil {
		ids, _ := json.Marshal(p.RunIDs)
		query = cols + `WHERE r.id IN (SELECT value FROM json_each(?)) ORDER BY r.id`
		args = []any{string(ids)}
	} else {
		limit := p.Limit
		if limit <= 0 {
			limit = state.OutboxDefaultLimit
		}
		query = cols + `WHERE (r.status NOT IN ('succeeded', 'failed', 'cancelled')
OR coalesce(r.completed_at, r.updated_at) >= strftime('%Y-%m-%dT%H:%M:%fZ','now', ?))
AND r.id > ? ORDER BY r.id LIMIT ?`
		args = []any{modifier(-p.FinishedWithin), p.AfterID, limit}
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: mirror runs: %w", err)
	}
	defer rows.Close()
	var out []*state.MirrorRun
	for rows.Next() {
		m := &state.MirrorRun{}
		if err := rows.Scan(&m.RunID, &m.Version, &m.Pending); err != nil {
			return nil, fmt.Errorf("sqlitestore: mirror runs: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: mirror runs: %w", err)
	}
	return out, nil
}
