package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/starflow/starflow/state"
)

var _ state.Outbox = (*Store)(nil)

// drainStates holds the drain state of each Store: its mutex (one pass at
// a time per Store) and its lease owner id.
var drainStates sync.Map // *Store → *drainState

type drainState struct {
	mu    sync.Mutex
	owner string // "pid <pid> <random hex>": unique per Store
}

func (s *Store) drainState() *drainState {
	if v, ok := drainStates.Load(s); ok {
		return v.(*drainState)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	v, _ := drainStates.LoadOrStore(s, &drainState{owner: fmt.Sprintf("pid %d %s", os.Getpid(), hex.EncodeToString(b[:]))})
	return v.(*drainState)
}

// The cross-process drain lease (table mirror_drain_lock).
const (
	drainLeaseName = "outbox"
	// drainLeaseTTL is how long a drain lease lasts without renewal: the
	// longest a pass of a process that died mid-pass holds up the others.
	// A pass renews it every drainLeaseTTL/3.
	drainLeaseTTL = 15 * time.Second
)

const sqliteNow = `strftime('%Y-%m-%dT%H:%M:%fZ','now')`

// DrainOutbox implements state.Outbox. When rows are unapplied (an empty
// outbox costs one read and no write), a pass first takes the drain lease
// (a row of mirror_drain_lock, taken with one conditional upsert when it
// is free, expired or already this Store's, on the database file's clock),
// so that one pass runs at a time across every process and Store sharing
// the file; when another holds it, the pass drains nothing (0, nil). The
// rows are then read from the reader pool and apply runs outside any
// transaction, so the single writer is never held during warm-store I/O
// (the lease is renewed every drainLeaseTTL/3 meanwhile, and apply's ctx
// is cancelled should it be lost); the applied ids are marked in one short
// write, and the lease is released.
func (s *Store) DrainOutbox(ctx context.Context, p *state.DrainOutboxParams, apply state.OutboxApplyFunc) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.OutboxDefaultLimit
	}
	ds := s.drainState()
	ds.mu.Lock()
	defer ds.mu.Unlock()

	// Nothing to drain costs no write (a pass runs every poll interval).
	var one int
	switch err := s.read.QueryRowContext(ctx, `SELECT 1 FROM mirror_outbox WHERE applied_at IS NULL LIMIT 1`).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("sqlitestore: drain outbox: %w", err)
	}
	held, err := s.takeDrainLease(ctx, ds.owner)
	if err != nil || !held {
		return 0, err
	}
	defer s.releaseDrainLease(context.WithoutCancel(ctx), ds.owner)

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
	actx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() { defer close(renewed); s.renewDrainLease(actx, cancel, ds.owner) }()
	applied, aerr := apply(actx, batch)
	cancel()
	<-renewed
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

// takeDrainLease takes or renews the drain lease for owner. Returns
// whether owner holds it.
func (s *Store) takeDrainLease(ctx context.Context, owner string) (bool, error) {
	res, err := s.write.ExecContext(ctx, `INSERT INTO mirror_drain_lock (name, owner, until)
VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now', ?))
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
WHERE mirror_drain_lock.owner = excluded.owner OR mirror_drain_lock.until < `+sqliteNow,
		drainLeaseName, owner, sqliteOffset(drainLeaseTTL))
	if err != nil {
		return false, fmt.Errorf("sqlitestore: drain outbox: take the drain lease: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlitestore: drain outbox: take the drain lease: %w", err)
	}
	return n == 1, nil
}

// renewDrainLease extends owner's lease every drainLeaseTTL/3 until ctx
// ends; when the lease is lost (another owner holds it, or no renewal
// succeeded for 2/3 of the TTL) it calls lost, so that apply stops.
func (s *Store) renewDrainLease(ctx context.Context, lost context.CancelFunc, owner string) {
	t := time.NewTicker(drainLeaseTTL / 3)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.write.ExecContext(ctx, `UPDATE mirror_drain_lock SET until = strftime('%Y-%m-%dT%H:%M:%fZ','now', ?)
WHERE name = ? AND owner = ?`, sqliteOffset(drainLeaseTTL), drainLeaseName, owner)
		if err == nil {
			if n, _ := res.RowsAffected(); n == 0 {
				lost()
				return
			}
			lastOK = time.Now()
		} else if time.Since(lastOK) >= 2*drainLeaseTTL/3 {
			lost()
			return
		}
	}
}

// releaseDrainLease frees owner's lease (best effort: it expires anyway).
func (s *Store) releaseDrainLease(ctx context.Context, owner string) {
	_, _ = s.write.ExecContext(ctx, `DELETE FROM mirror_drain_lock WHERE name = ? AND owner = ?`, drainLeaseName, owner)
}

// PruneOutbox implements state.Outbox.
func (s *Store) PruneOutbox(ctx context.Context, p *state.PruneOutboxParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.PruneDefaultLimit
	}
	res, err := s.write.ExecContext(ctx, `DELETE FROM mirror_outbox WHERE id IN (
SELECT id FROM mirror_outbox WHERE applied_at IS NOT NULL
AND applied_at < strftime('%Y-%m-%dT%H:%M:%fZ','now', ?) LIMIT ?)`, sqliteOffset(-p.OlderThan), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: prune outbox: %w", translate(err))
	}
	return res.RowsAffected()
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
		args = []any{sqliteOffset(-p.FinishedWithin), p.AfterID, limit}
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
