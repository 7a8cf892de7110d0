package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// lostRun is one run the sweep found with an expired lease (and locked).
type lostRun struct {
	id, runner, pool, mode string
	m                      runMeta
	max                    int
	epoch                  int64
}

// ExpireOldLeases implements state.Adapter with the transitions and events
// of sqlitestore's sweep (the lost attempt's running steps fail too). The expired runs are selected FOR UPDATE SKIP
// LOCKED, so a run a runner (or a frozen runner, or another sweeper) has
// locked is left for the next pass; several sweepers at once each change
// disjoint runs. The transaction runs under SET LOCAL lock_timeout
// (Config.SweepLockTimeout) so that no other lock can hold it up either.
// Re-queued runs' pools are notified on Channel. The per-run writes go to
// the server in one batch.
func (s *Store) ExpireOldLeases(ctx context.Context, p *state.ExpireOldLeasesParams) ([]*starflowtype.Run, error) {
	reason := orDefault(p.Reason, "runner_lost")
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	var changed []*starflowtype.Run
	_, err := s.inTx(ctx, "ExpireOldLeases", "", false, func(t *txn) error {
		timeout := fmt.Sprintf("%dms", s.cfg.SweepLockTimeout.Milliseconds())
		if _, err := t.exec(ctx, "SELECT set_config('lock_timeout', $1, true)", timeout); err != nil {
			return fmt.Errorf("set lock_timeout: %w", err)
		}
		runs, err := expiredRuns(ctx, t.tx, limit)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			t.idle = true
			return nil
		}
		// The lost attempts' waits first, while their steps still wait.
		for _, l := range runs {
			if err := s.endAttempt(ctx, t, l.id, l.m.attempt); err != nil {
				return err
			}
		}
		var dead []string
		b := &pgx.Batch{}
		for _, l := range runs {
			b.Queue(q("run_lost"), reason, l.id)
			b.Queue(q("steps_lost"), reason, l.id, l.m.attempt)
			payload, _ := json.Marshal(map[string]any{"reason": reason, "runner_id": l.runner, "lease_epoch": l.epoch})
			t.queueEvent(b, l.m, l.id, starflowtype.EventRunnerLost, payload)
			switch {
			case starflowtype.RecoveryMode(l.mode) == starflowtype.RecoveryManual:
				// stays interrupted/abandoned until an operator acts
				payload, _ := json.Marshal(map[string]any{"error": reason, "recovery_mode": l.mode})
				if err := t.event(ctx, l.m, l.id, 0, starflowtype.EventRunInterrupted, "", "", payload); err != nil {
					return err
				}
			case l.m.attempt < l.max:
				var delay time.Duration
				if p.Backoff != nil {
					delay = p.Backoff(l.m.attempt)
				}
				b.Queue(q("run_lost_requeue"), delay.Microseconds(), l.id)
				payload, _ := json.Marshal(map[string]any{"error": reason, "next_attempt": l.m.attempt + 1, "backoff_ms": delay.Milliseconds()})
				t.queueEvent(b, l.m, l.id, starflowtype.EventRunInterrupted, payload)
				t.notify = append(t.notify, l.pool)
			default:
				b.Queue(q("run_failed"), reason, true, l.id)
				payload, _ := json.Marshal(map[string]any{"error": reason})
				t.queueEvent(b, l.m, l.id, starflowtype.EventRunFailed, payload)
				t.queueEvent(b, l.m, l.id, starflowtype.EventRunDeadLettered, nil)
				dead = append(dead, l.id)
			}
			b.Queue(q("get_run"), l.id, "").QueryRow(func(row pgx.Row) error {
				r, err := scanRun(row)
				if err != nil {
					return fmt.Errorf("read back run %s: %w", l.id, err)
				}
				changed = append(changed, r)
				return nil
			})
		}
		if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
			return translate(err)
		}
		for _, id := range dead {
			if err := s.endRun(ctx, t, id); err != nil {
				return err
			}
		}
		// Parents re-queued by a dead-lettered child's end follow the
		// swept runs.
		t.ch.Runs = append(append([]*starflowtype.Run(nil), changed...), t.ch.Runs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: expire old leases: %w", err)
	}
	return changed, nil
}

// expiredRuns selects and locks up to limit runs whose lease expired.
func expiredRuns(ctx context.Context, tx pgx.Tx, limit int) ([]lostRun, error) {
	rows, err := tx.Query(ctx, q("expired_leases"), limit)
	if err != nil {
		return nil, translate(err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lostRun, error) {
		var l lostRun
		err := row.Scan(&l.id, &l.m.workspace, &l.m.env, &l.m.attempt, &l.max, &l.mode, &l.runner, &l.epoch, &l.pool)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("select expired leases: %w", translate(err))
	}
	return runs, nil
}

// queueEvent is event for a batch: the row is appended when the batch
// runs, and recorded in the Change (in queue order) as its result is read.
func (t *txn) queueEvent(b *pgx.Batch, m runMeta, runID string, typ starflowtype.EventType, payload json.RawMessage) {
	ev := &starflowtype.Event{RunID: runID, Attempt: m.attempt, Type: typ, Payload: payload}
	b.Queue(q("insert_event"), runID, m.workspace, m.env, m.attempt, string(typ), nil, "", nullJSON(payload)).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&ev.ID, &ev.CreatedAt); err != nil {
				return fmt.Errorf("insert %s event: %w", typ, err)
			}
			ev.CreatedAt = ev.CreatedAt.UTC()
			t.ch.Events = append(t.ch.Events, ev)
			return nil
		})
}
