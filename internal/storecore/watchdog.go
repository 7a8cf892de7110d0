package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// RunnerSeen implements state.Watchdog: the upsert and the removal of
// long-expired rows, in one write.
func (s *Store) RunnerSeen(ctx context.Context, p *state.RunnerSeenParams) error {
	if p.RunnerID == "" || p.TTL <= 0 {
		return s.errorf("runner seen: %w", starflowtype.Invalid(fmt.Errorf("runner %q: an id and a positive TTL (%s) are required", p.RunnerID, p.TTL)))
	}
	pools, err := json.Marshal(orEmpty(p.Pools))
	if err != nil {
		return s.errorf("runner seen: %w", err)
	}
	_, err = s.write(ctx, state.OpRunnerSeen, "", false, func(t *txn) error {
		if _, err := t.tx.Exec(ctx, "runner_seen", p.RunnerID, p.WorkspaceID, json.RawMessage(pools), p.OnlyRun,
			p.Concurrency, p.RunsHeld, p.TTL); err != nil {
			return err
		}
		_, err := t.tx.Exec(ctx, "runners_forget", -state.RunnerForget)
		return err
	})
	if err != nil {
		return s.errorf("runner seen %s: %w", p.RunnerID, err)
	}
	return nil
}

// RunnerGone implements state.Watchdog.
func (s *Store) RunnerGone(ctx context.Context, runnerID string) error {
	_, err := s.write(ctx, state.OpRunnerGone, "", false, func(t *txn) error {
		_, err := t.tx.Exec(ctx, "runner_gone", runnerID)
		return err
	})
	if err != nil {
		return s.errorf("runner gone %s: %w", runnerID, err)
	}
	return nil
}

// ListRunners implements state.Watchdog.
func (s *Store) ListRunners(ctx context.Context, p *state.ListRunnersParams) ([]*starflowtype.Runner, error) {
	out, err := queryAll(ctx, s.reader(), "list_runners", func(row Row) (*starflowtype.Runner, error) {
		var r starflowtype.Runner
		var pools []byte
		if err := row.Scan(&r.ID, &r.WorkspaceID, &pools, &r.OnlyRun, &r.Concurrency, &r.RunsHeld,
			&r.StartedAt, &r.LastSeen, &r.ExpiresAt); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(pools, &r.Pools); err != nil {
			return nil, fmt.Errorf("runner %s: pools %q: %w", r.ID, pools, err)
		}
		r.Pools = orEmpty(r.Pools)
		return &r, nil
	}, p.WorkspaceID, p.Live)
	if err != nil {
		return nil, s.errorf("list runners: %w", err)
	}
	return out, nil
}

// RunsStuck implements state.Watchdog: one runs_stuck statement for the
// ids that are uuids.
func (s *Store) RunsStuck(ctx context.Context, p *state.RunsStuckParams) ([]*state.StuckRow, error) {
	ids := make([]string, 0, len(p.RunIDs))
	for _, id := range p.RunIDs {
		if c, ok := CanonicalID(id); ok {
			ids = append(ids, c)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := queryAll(ctx, s.reader(), "runs_stuck", func(row Row) (*state.StuckRow, error) {
		var r state.StuckRow
		var status, mode, kind string
		var backoffMS int64
		if err := row.Scan(&r.RunID, &r.WorkspaceID, &r.Env, &r.Pool, &status, &r.Class, &r.Since,
			&r.Attempt, &r.MaxAttempts, &mode, &r.Error, &r.LeasedBy, &r.LastHeartbeat,
			&r.AvailableAt, &kind, &r.WaitSignal, &r.WaitKey, &r.WaitStepID, &r.WaitScopePath, &r.WaitWakeAt,
			&r.WaitExpiresAt, &r.StepID, &r.StepScopePath, &r.StepTries, &r.RetryAt, &backoffMS); err != nil {
			return nil, err
		}
		r.Status, r.RecoveryMode, r.WaitKind = starflowtype.RunStatus(status), starflowtype.RecoveryMode(mode), starflowtype.WaitKind(kind)
		r.RetryBackoff = time.Duration(backoffMS) * time.Millisecond
		return &r, nil
	}, ids)
	if err != nil {
		return nil, s.errorf("runs stuck: %w", err)
	}
	return out, nil
}

// QueueHead implements state.Watchdog.
func (s *Store) QueueHead(ctx context.Context, p *state.QueueHeadParams) ([]*state.QueuedRun, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = starflowtype.QueuePositionMax + 1
	}
	out, err := queryAll(ctx, s.reader(), "queue_head", func(row Row) (*state.QueuedRun, error) {
		var q state.QueuedRun
		return &q, row.Scan(&q.ID, &q.Priority, &q.AvailableAt, &q.CreatedAt)
	}, p.WorkspaceID, p.Env, p.Pool, limit)
	if err != nil {
		return nil, s.errorf("queue head: %w", err)
	}
	return out, nil
}

// StuckCounts implements state.Watchdog.
func (s *Store) StuckCounts(ctx context.Context, p *state.StuckCountsParams) ([]*state.StuckCount, error) {
	buckets := p.Buckets
	if buckets == nil {
		buckets = []float64{}
	}
	out, err := queryAll(ctx, s.reader(), "stuck_counts", func(row Row) (*state.StuckCount, error) {
		var c state.StuckCount
		return &c, row.Scan(&c.Class, &c.WorkspaceID, &c.Pool, &c.Bucket, &c.Count, &c.AgeSum)
	}, buckets)
	if err != nil {
		return nil, s.errorf("stuck counts: %w", err)
	}
	return out, nil
}

// queryAll runs the named query and scans every row with scan.
func queryAll[T any](ctx context.Context, q Querier, name string, scan func(Row) (*T, error), args ...any) ([]*T, error) {
	rows, err := q.Query(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
