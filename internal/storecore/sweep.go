package storecore

import (
	"context"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// lostRun is one run the sweep found with an expired lease (and locked).
type lostRun struct {
	m                  runMeta
	runner, pool, mode string
	maxAttempts        int
	epoch              int64
}

// ExpireOldLeases implements state.Adapter. The expired runs are selected
// (PostgreSQL: FOR UPDATE SKIP LOCKED, so a run a runner, a frozen runner
// or another sweeper has locked is left for the next pass, and several
// sweepers change disjoint runs; SQLite: the single writer serialises
// sweeps) in a transaction whose lock waits are bounded by
// Config.SweepLockTimeout. Re-queued runs' pools are notified.
func (s *Store) ExpireOldLeases(ctx context.Context, p *state.ExpireOldLeasesParams) ([]*starflowtype.Run, error) {
	reason := orDefault(p.Reason, "runner_lost")
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	var changed []*starflowtype.Run
	_, err := s.writeOpts(ctx, TxOptions{LockTimeout: s.cfg.SweepLockTimeout}, state.OpExpireOldLeases, "", false, func(t *txn) error {
		changed = nil
		runs, err := t.expiredRuns(ctx, limit)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			t.idle = true
			return nil
		}
		var dead []string
		for _, l := range runs {
			id := l.m.id
			// The lost attempt's waits first, while their steps still wait.
			if err := t.endAttempt(ctx, id, l.m.attempt); err != nil {
				return err
			}
			// The reason replaces the run's error, and clears its object.
			if _, err := t.tx.Exec(ctx, "run_lost", reason, id); err != nil {
				return err
			}
			if _, err := t.tx.Exec(ctx, "steps_lost", reason, id, l.m.attempt); err != nil {
				return err
			}
			t.ch.Ended = append(t.ch.Ended, state.EndedAttempt{RunID: id, Attempt: l.m.attempt})
			payload := marshal(map[string]any{"reason": reason, "runner_id": l.runner, "lease_epoch": l.epoch})
			if err := t.event(ctx, l.m, id, 0, starflowtype.EventRunnerLost, "", "", payload); err != nil {
				return err
			}
			switch {
			case starflowtype.RecoveryMode(l.mode) == starflowtype.RecoveryManual:
				// stays interrupted/abandoned until an operator acts
				payload := marshal(map[string]any{"error": reason, "recovery_mode": l.mode})
				if err := t.event(ctx, l.m, id, 0, starflowtype.EventRunInterrupted, "", "", payload); err != nil {
					return err
				}
			case l.m.attempt < l.maxAttempts:
				var delay time.Duration
				if p.Backoff != nil {
					delay = p.Backoff(l.m.attempt)
				}
				if _, err := t.tx.Exec(ctx, "run_lost_requeue", delay, id); err != nil {
					return err
				}
				payload := marshal(map[string]any{"error": reason, "next_attempt": l.m.attempt + 1, "backoff_ms": delay.Milliseconds()})
				if err := t.event(ctx, l.m, id, 0, starflowtype.EventRunInterrupted, "", "", payload); err != nil {
					return err
				}
				t.notify = append(t.notify, l.pool)
			default:
				// The reason has no typed object (error_json NULL).
				if _, err := t.tx.Exec(ctx, "run_failed", reason, true, id, nil); err != nil {
					return err
				}
				if err := t.event(ctx, l.m, id, 0, starflowtype.EventRunFailed, "", "", marshal(map[string]any{"error": reason})); err != nil {
					return err
				}
				if err := t.event(ctx, l.m, id, 0, starflowtype.EventRunDeadLettered, "", "", nil); err != nil {
					return err
				}
				dead = append(dead, id)
			}
		}
		for _, l := range runs {
			r, err := getRun(ctx, t.tx, "", l.m.id)
			if err != nil {
				return err
			}
			changed = append(changed, r)
		}
		for _, id := range dead {
			if err := t.endRun(ctx, id); err != nil {
				return err
			}
		}
		// Parents re-queued by a dead-lettered child's end follow the
		// swept runs.
		t.ch.Runs = append(append([]*starflowtype.Run(nil), changed...), t.ch.Runs...)
		return nil
	})
	if err != nil {
		return nil, s.errorf("expire old leases: %w", err)
	}
	return changed, nil
}

// expiredRuns selects (and, where the dialect locks rows, locks) up to
// limit runs whose lease expired.
func (t *txn) expiredRuns(ctx context.Context, limit int) ([]lostRun, error) {
	rows, err := t.tx.Query(ctx, "expired_leases", limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lostRun
	for rows.Next() {
		var l lostRun
		if err := rows.Scan(&l.m.id, &l.m.workspace, &l.m.env, &l.m.attempt, &l.maxAttempts, &l.mode, &l.runner, &l.epoch, &l.pool); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
