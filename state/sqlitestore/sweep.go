package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// ExpireOldLeases implements state.Adapter. On SQLite the single writer
// serialises sweeps, so several sweepers (processes) are safe: a run is
// changed by the first and no longer matches for the others.
func (s *Store) ExpireOldLeases(ctx context.Context, p *state.ExpireOldLeasesParams) ([]*starflowtype.Run, error) {
	reason := orDefault(p.Reason, "runner_lost")
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	type lost struct {
		id, ws, env, mode, runner string
		attempt, max              int
		epoch                     int64
	}
	var changed []*starflowtype.Run
	_, err := s.inTx(ctx, "ExpireOldLeases", "", false, func(t *txn) error {
		rows, err := t.query(ctx, "expired_leases", limit)
		if err != nil {
			return translate(err)
		}
		var runs []lost
		for rows.Next() {
			var l lost
			if err := rows.Scan(&l.id, &l.ws, &l.env, &l.attempt, &l.max, &l.mode, &l.runner, &l.epoch); err != nil {
				rows.Close()
				return err
			}
			runs = append(runs, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(runs) == 0 {
			t.idle = true
			return nil
		}
		for _, l := range runs {
			m := runMeta{workspace: l.ws, env: l.env, attempt: l.attempt}
			if _, err := t.exec(ctx, "run_lost", reason, l.id); err != nil {
				return translate(err)
			}
			if err := s.endAttempt(ctx, t, l.id, l.attempt); err != nil {
				return err
			}
			if _, err := t.exec(ctx, "steps_lost", reason, l.id, l.attempt); err != nil {
				return translate(err)
			}
			payload, _ := json.Marshal(map[string]any{"reason": reason, "runner_id": l.runner, "lease_epoch": l.epoch})
			if err := t.event(ctx, m, l.id, 0, starflowtype.EventRunnerLost, "", "", payload); err != nil {
				return err
			}
			switch {
			case starflowtype.RecoveryMode(l.mode) == starflowtype.RecoveryManual:
				// stays interrupted/abandoned until an operator acts
				payload, _ := json.Marshal(map[string]any{"error": reason, "recovery_mode": l.mode})
				if err := t.event(ctx, m, l.id, 0, starflowtype.EventRunInterrupted, "", "", payload); err != nil {
					return err
				}
			case l.attempt < l.max:
				var delay time.Duration
				if p.Backoff != nil {
					delay = p.Backoff(l.attempt)
				}
				if _, err := t.exec(ctx, "run_lost_requeue", sqliteOffset(delay), l.id); err != nil {
					return translate(err)
				}
				payload, _ := json.Marshal(map[string]any{"error": reason, "next_attempt": l.attempt + 1, "backoff_ms": delay.Milliseconds()})
				if err := t.event(ctx, m, l.id, 0, starflowtype.EventRunInterrupted, "", "", payload); err != nil {
					return err
				}
			default:
				if _, err := t.exec(ctx, "run_failed", reason, true, l.id); err != nil {
					return translate(err)
				}
				payload, _ := json.Marshal(map[string]any{"error": reason})
				if err := t.event(ctx, m, l.id, 0, starflowtype.EventRunFailed, "", "", payload); err != nil {
					return err
				}
				if err := t.event(ctx, m, l.id, 0, starflowtype.EventRunDeadLettered, "", "", nil); err != nil {
					return err
				}
				if err := s.endRun(ctx, t, l.id); err != nil {
					return err
				}
			}
			r, err := getRun(ctx, t.tx, "", l.id)
			if err != nil {
				return err
			}
			changed = append(changed, r)
		}
		// Parents re-queued by a dead-lettered child's end follow the
		// swept runs.
		t.ch.Runs = append(append([]*starflowtype.Run(nil), changed...), t.ch.Runs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: expire old leases: %w", err)
	}
	return changed, nil
}
