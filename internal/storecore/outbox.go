package storecore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

var _ state.Outbox = (*Store)(nil)

// The drain lease (table mirror_drain_lock): one drain pass at a time
// across every process and Store sharing the database.
const (
	drainLeaseName = "outbox"
	// DrainLeaseTTL is how long a drain lease lasts without renewal: the
	// longest a pass of a process that died mid-pass holds up the others.
	// A pass renews it every DrainLeaseTTL/3.
	DrainLeaseTTL = 5 * time.Second
)

// OutboxStatsExact is the number of unapplied rows OutboxStats reads: up
// to it, the counts are exact; beyond, estimated (OutboxStats.Estimated).
const OutboxStatsExact = 10000

// drainState is a Store's drain mutex (one pass at a time per Store) and
// its lease owner id.
type drainState struct {
	mu    sync.Mutex
	owner string // "pid <pid> <random hex>": unique per Store
}

func newOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("pid %d %s", os.Getpid(), hex.EncodeToString(b[:]))
}

// DrainOutbox implements state.Outbox. When rows are unapplied (an empty
// outbox costs one read and no write), a pass first takes the drain lease
// (a row of mirror_drain_lock, taken with one conditional upsert when it
// is free, expired or already this Store's, on the database clock), so
// that one pass runs at a time across every process and Store sharing the
// database; when another holds it, the pass drains nothing (0, nil). The
// oldest p.Limit unapplied rows are then read in id order (a run's rows
// in commit order: the mirror hook updates the run row, which serialises
// the run's writes, before it inserts) and apply runs outside any
// transaction, so no writer and no row lock is held during warm-store I/O
// (the lease is renewed every DrainLeaseTTL/3 meanwhile, and apply's ctx
// is cancelled should it be lost); the applied ids are marked in one short
// write, and the lease is released.
func (s *Store) DrainOutbox(ctx context.Context, p *state.DrainOutboxParams, apply state.OutboxApplyFunc) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.OutboxDefaultLimit
	}
	s.drain.mu.Lock()
	defer s.drain.mu.Unlock()
	owner := s.drain.owner

	var one int
	switch err := s.reader().QueryRow(ctx, "outbox_any").Scan(&one); {
	case isNoRows(err):
		return 0, nil
	case err != nil:
		return 0, s.errorf("drain outbox: %w", err)
	}
	held, err := s.drainLease(ctx, "drain_lease_take", drainLeaseName, owner, DrainLeaseTTL)
	if err != nil || !held {
		return 0, err
	}
	defer func() {
		_, _ = s.drainLease(context.WithoutCancel(ctx), "drain_lease_release", drainLeaseName, owner)
	}()
	batch, err := s.unapplied(ctx, limit)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	actx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() { defer close(renewed); s.renewDrainLease(actx, cancel, owner) }()
	applied, aerr := apply(actx, batch)
	cancel()
	<-renewed
	if len(applied) > 0 {
		// Marking must survive a cancelled ctx: what was applied is applied.
		mctx := context.WithoutCancel(ctx)
		if _, err := s.write(mctx, "MarkOutboxApplied", "", false, func(t *txn) error {
			t.idle = true // outbox bookkeeping: no hook
			_, err := t.tx.Exec(mctx, "outbox_mark_applied", applied)
			return err
		}); err != nil {
			return 0, s.errorf("mark outbox rows applied: %w", err)
		}
	}
	return len(applied), aerr
}

// unapplied reads the oldest limit unapplied outbox rows in id order.
func (s *Store) unapplied(ctx context.Context, limit int) ([]*state.OutboxRow, error) {
	rows, err := s.reader().Query(ctx, "outbox_unapplied", limit)
	if err != nil {
		return nil, s.errorf("drain outbox: %w", err)
	}
	defer rows.Close()
	var out []*state.OutboxRow
	for rows.Next() {
		r := &state.OutboxRow{}
		if err := rows.Scan(&r.ID, &r.RunID, &r.Kind, &r.Payload, &r.Version, &r.CreatedAt); err != nil {
			return nil, s.errorf("drain outbox: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("drain outbox: %w", err)
	}
	return out, nil
}

// drainLease runs one of the drain-lease statements (take, renew,
// release: name, owner, then the TTL for take and renew) as a write
// without hooks and reports whether it changed a row.
func (s *Store) drainLease(ctx context.Context, query string, args ...any) (bool, error) {
	var n int64
	_, err := s.write(ctx, "DrainLease", "", false, func(t *txn) error {
		t.idle = true // outbox bookkeeping: no hook
		var err error
		n, err = t.tx.Exec(ctx, query, args...)
		return err
	})
	if err != nil {
		return false, s.errorf("drain outbox: %s: %w", query, err)
	}
	return n == 1, nil
}

// renewDrainLease extends owner's lease every DrainLeaseTTL/3 until ctx
// ends; when the lease is lost (another owner holds it, or no renewal
// succeeded for 2/3 of the TTL) it calls lost, so that apply stops.
func (s *Store) renewDrainLease(ctx context.Context, lost context.CancelFunc, owner string) {
	t := time.NewTicker(DrainLeaseTTL / 3)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, err := s.drainLease(ctx, "drain_lease_renew", drainLeaseName, owner, DrainLeaseTTL)
		switch {
		case err == nil && !held:
			lost()
			return
		case err == nil:
			lastOK = time.Now()
		case time.Since(lastOK) >= 2*DrainLeaseTTL/3:
			lost()
			return
		}
	}
}

// PruneOutbox implements state.Outbox.
func (s *Store) PruneOutbox(ctx context.Context, p *state.PruneOutboxParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.PruneDefaultLimit
	}
	var n int64
	_, err := s.write(ctx, "PruneOutbox", "", false, func(t *txn) error {
		t.idle = true // outbox bookkeeping: no hook
		var err error
		n, err = t.pruneOutbox(ctx, p.OlderThan, limit)
		return err
	})
	if err != nil {
		return 0, s.errorf("prune outbox: %w", err)
	}
	return n, nil
}

// pruneOutbox deletes up to limit rows applied more than olderThan ago
// (PruneOutbox, and CollectGarbage's outbox kind).
func (t *txn) pruneOutbox(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
	return t.tx.Exec(ctx, "outbox_prune", -olderThan, limit)
}

// OutboxStats implements state.Outbox with a bounded cost: it reads the
// newest OutboxStatsExact unapplied rows and the oldest one. When there
// are fewer, every count is exact. Otherwise Pending is estimated from the
// id span of the unapplied rows (an upper bound: rows applied out of order
// and ids lost to rolled-back inserts count too), the rows beyond the ones
// read are counted in the bucket of the oldest row's age, and Estimated is
// set; OldestAge is exact either way.
func (s *Store) OutboxStats(ctx context.Context, p *state.OutboxStatsParams) (*state.OutboxStats, error) {
	var (
		n, lowID, highID    int64
		windowOld, firstAge float64
	)
	if err := s.reader().QueryRow(ctx, "outbox_window", OutboxStatsExact).Scan(&n, &windowOld, &highID, &lowID, &firstAge); err != nil {
		return nil, s.errorf("outbox stats: %w", err)
	}
	bounds := make([]float64, len(p.Bounds))
	for i, b := range p.Bounds {
		bounds[i] = b.Seconds()
	}
	buckets := make([]int64, len(p.Bounds)+1)
	if len(p.Bounds) > 0 && n > 0 {
		rows, err := s.reader().Query(ctx, "outbox_buckets", OutboxStatsExact, bounds)
		if err != nil {
			return nil, s.errorf("outbox stats: %w", err)
		}
		for rows.Next() {
			var i, c int64
			if err := rows.Scan(&i, &c); err != nil {
				rows.Close()
				return nil, s.errorf("outbox stats: %w", err)
			}
			if i >= 0 && int(i) < len(buckets) {
				buckets[i] += c
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.errorf("outbox stats: %w", err)
		}
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

// MirrorRuns implements state.Outbox.
func (s *Store) MirrorRuns(ctx context.Context, p *state.MirrorRunsParams) ([]*state.MirrorRun, error) {
	var (
		rows Rows
		err  error
	)
	if p.RunIDs != nil {
		ids := make([]string, 0, len(p.RunIDs))
		for _, id := range p.RunIDs {
			if c, ok := CanonicalID(id); ok {
				ids = append(ids, c)
			}
		}
		rows, err = s.reader().Query(ctx, "mirror_runs_ids", ids)
	} else {
		limit := p.Limit
		if limit <= 0 {
			limit = state.OutboxDefaultLimit
		}
		after, ok := CanonicalID(p.AfterID)
		if !ok {
			after = "00000000-0000-0000-0000-000000000000"
		}
		rows, err = s.reader().Query(ctx, "mirror_runs_page", -p.FinishedWithin, after, limit)
	}
	if err != nil {
		return nil, s.errorf("mirror runs: %w", err)
	}
	defer rows.Close()
	var out []*state.MirrorRun
	for rows.Next() {
		m := &state.MirrorRun{}
		if err := rows.Scan(&m.RunID, &m.Version, &m.Pending); err != nil {
			return nil, s.errorf("mirror runs: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("mirror runs: %w", err)
	}
	return out, nil
}

// hookTx is the state.HookTx of one write: typed operations over its
// transaction.
type hookTx struct{ tx Tx }

// StepsOf implements state.HookTx.
func (h hookTx) StepsOf(ctx context.Context, runID string, attempt int, statuses []starflowtype.StepStatus, limit int) ([]*starflowtype.Step, error) {
	st := make([]string, len(statuses))
	for i, s := range statuses {
		st[i] = string(s)
	}
	var lim any
	if limit > 0 {
		lim = limit
	}
	return listSteps(ctx, h.tx, "steps_of", runID, attempt, st, lim)
}

// BumpMirrorVersion implements state.HookTx.
func (h hookTx) BumpMirrorVersion(ctx context.Context, runID, hash string, force bool) (int64, bool, error) {
	var v int64
	err := h.tx.QueryRow(ctx, "mirror_bump", runID, hash, force).Scan(&v)
	if isNoRows(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("bump mirror version of run %s: %w", runID, err)
	}
	return v, true, nil
}

// AppendOutbox implements state.HookTx: one statement for all the rows.
func (h hookTx) AppendOutbox(ctx context.Context, rows []*state.OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	ids, kinds, payloads := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	versions := make([]int64, len(rows))
	for i, r := range rows {
		ids[i], kinds[i], payloads[i], versions[i] = r.RunID, r.Kind, string(r.Payload), r.Version
	}
	if _, err := h.tx.Exec(ctx, "outbox_append", ids, kinds, payloads, versions); err != nil {
		return fmt.Errorf("insert mirror_outbox rows: %w", err)
	}
	return nil
}
