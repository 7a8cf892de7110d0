package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// maxCancelDepth bounds CancelRun's cascade through child runs.
const maxCancelDepth = 64

// deadlockTries bounds inTxRetry.
const deadlockTries = 3

// codeDeadlock is PostgreSQL's deadlock_detected.
const codeDeadlock = "40P01"

// inTxRetry is inTx, tried again when PostgreSQL broke a deadlock by
// aborting this transaction. Writes that lock two runs use it: a child's
// end locks the child, then its parent; a cancel locks the parent, then
// its children. fn must be safe to run again (it assigns its results).
func (s *Store) inTxRetry(ctx context.Context, op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	for try := 1; ; try++ {
		run, err := s.inTx(ctx, op, runID, readRun, fn)
		var pe *pgconn.PgError
		if err == nil || try == deadlockTries || ctx.Err() != nil || !errors.As(err, &pe) || pe.Code != codeDeadlock {
			return run, err
		}
	}
}

// OnRunPaused implements state.Waiter (commit boundary 1).
func (s *Store) OnRunPaused(ctx context.Context, p *state.RunPausedParams) error {
	payload, err := state.PausedPayload(p)
	if err != nil {
		return fmt.Errorf("pgstore: run paused: %w", err)
	}
	_, err = s.inTx(ctx, "OnRunPaused", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if m.cancel {
			// As OnNodeStart: a run being cancelled enters no wait (and
			// so a workflow_call starts no child for it).
			return fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrCancelRequested)
		}
		if _, err := t.exec(ctx, q("run_paused"), nullJSON(p.Snapshot), p.RunID); err != nil {
			return err
		}
		if err := t.mustAffect(ctx, q("step_waiting"), p.RunID, p.Attempt, p.ScopePath, p.StepID,
			m.workspace, m.env, p.Kind); err != nil {
			return fmt.Errorf("step %q already succeeded: %w", p.StepID, err)
		}
		if p.Phase != "" {
			n, err := t.exec(ctx, q("set_phase"), p.Phase, p.RunID)
			if err != nil {
				return err
			}
			if n > 0 {
				ph, _ := json.Marshal(map[string]any{"phase": p.Phase})
				if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventPhase, "", "", ph); err != nil {
					return err
				}
			}
		}
		if err := t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventRunPaused, p.StepID, p.ScopePath, payload); err != nil {
			return err
		}
		return s.stepChanged(ctx, t, p.StepKey)
	})
	if err != nil {
		return fmt.Errorf("pgstore: run paused %s: %w", p.StepID, err)
	}
	return nil
}

// RegisterWait implements state.Waiter (commit boundary 2). A wait with a
// correlation key takes the key's advisory lock, as Signal by key does, so
// that a signal by key and the registration of its wait never both miss
// each other.
func (s *Store) RegisterWait(ctx context.Context, p *state.RegisterWaitParams) (*starflowtype.Wait, error) {
	signal, err := state.CheckRegisterWait(p)
	if err != nil {
		return nil, fmt.Errorf("pgstore: register wait: %w", err)
	}
	id := p.ID
	if id == "" {
		id = uuid.NewString()
	} else if id, err = canonicalUUID(id); err != nil {
		return nil, fmt.Errorf("pgstore: register wait: id: %w", err)
	}
	var out *starflowtype.Wait
	_, err = s.inTxRetry(ctx, "RegisterWait", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		existing, err := scanWait(t.tx.QueryRow(ctx, q("get_wait_by_step"), p.RunID, p.Attempt, p.ScopePath, p.StepID))
		if err == nil {
			out = existing // re-entered after a crash: registered once
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return translate(err)
		}
		if p.CorrelationKey != "" && p.Kind != starflowtype.WaitTimer {
			if _, err := t.exec(ctx, q("wake_lock"), s.wakeLockKey(m.workspace, signal, p.CorrelationKey)); err != nil {
				return fmt.Errorf("wake lock: %w", err)
			}
		}
		if _, err := t.exec(ctx, q("insert_wait"), id, p.RunID, m.workspace, p.Attempt, p.ScopePath, p.StepID,
			string(p.Kind), nullString(signal), nullString(p.CorrelationKey),
			absTime(p.WakeAt), micros(p.WakeIn), absTime(p.ExpiresAt), micros(p.ExpiresIn),
			nullString(p.TokenHash), nullString(p.KeyID), nullJSON(p.Notify), max(p.NotifyGrace, 0).Microseconds()); err != nil {
			return err
		}
		if p.Kind != starflowtype.WaitTimer {
			var inboxID, payload string
			err := t.tx.QueryRow(ctx, q("inbox_match"), p.RunID, m.workspace, signal, p.CorrelationKey).Scan(&inboxID, &payload)
			w := &starflowtype.Wait{ID: id, RunID: p.RunID, Kind: p.Kind, Signal: signal, StepID: p.StepID, ScopePath: p.ScopePath, Attempt: p.Attempt}
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				if p.Kind == starflowtype.WaitChild {
					if err := s.wakeFromChildEnd(ctx, t, w, p.CorrelationKey); err != nil {
						return err
					}
				}
			case err != nil:
				return translate(err)
			default:
				if err := t.mustAffect(ctx, q("inbox_consume"), inboxID); err != nil {
					return fmt.Errorf("consume inbox entry %s: %w", inboxID, err)
				}
				if err := s.wake(ctx, t, w, starflowtype.WaitWoken, json.RawMessage(payload), "inbox", false); err != nil {
					return err
				}
			}
		}
		out, err = t.waitChanged(ctx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: register wait %s: %w", p.StepID, err)
	}
	return out, nil
}

// ParkRun implements state.Waiter (commit boundary 3). A run queued at
// once has its pool notified on Channel.
func (s *Store) ParkRun(ctx context.Context, p *state.ParkRunParams) (*starflowtype.Run, error) {
	// inTxRetry: a cancel at park locks the run's parent (endRun) and its
	// children (cancelParked), which a child's end locks the other way.
	run, err := s.inTxRetry(ctx, "ParkRun", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var claim, pool string
		err = t.tx.QueryRow(ctx, q("park_run"), p.RunID).Scan(&claim, &pool)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %s is not paused (OnRunPaused comes first): %w", p.RunID, starflowtype.ErrConflict)
		}
		if err != nil {
			return translate(err)
		}
		if m.cancel {
			// An operator cancelled the run while it entered its wait: no
			// runner would ever see the request, so the cancel ends it here.
			return s.cancelParked(ctx, t, p.RunID)
		}
		if claim == string(starflowtype.ClaimQueued) {
			t.notify = append(t.notify, pool)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: park run: %w", err)
	}
	return run, nil
}

// GetWait implements state.Waiter.
func (s *Store) GetWait(ctx context.Context, p *state.GetWaitParams) (*starflowtype.Wait, error) {
	notFound := fmt.Errorf("wait %s%s/%s: %w", p.ID, p.ScopePath, p.StepID, starflowtype.ErrNotFound)
	var row pgx.Row
	if p.ID != "" {
		if !isUUID(p.ID) {
			return nil, notFound
		}
		row = s.pool.QueryRow(ctx, q("get_wait"), p.ID)
	} else {
		if !isUUID(p.RunID) {
			return nil, notFound
		}
		row = s.pool.QueryRow(ctx, q("get_wait_by_step"), p.RunID, p.Attempt, p.ScopePath, p.StepID)
	}
	w, err := scanWait(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get wait: %w", err)
	}
	return w, nil
}

// ListWaits implements state.Waiter.
func (s *Store) ListWaits(ctx context.Context, p *state.ListWaitsParams) ([]*starflowtype.Wait, error) {
	if p.RunID != "" && !isUUID(p.RunID) {
		return nil, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses := make([]string, len(p.Status))
	for i, st := range p.Status {
		statuses[i] = string(st)
	}
	return s.queryWaits(ctx, "list waits", q("list_waits"), p.RunID, statuses, limit)
}

func (s *Store) queryWaits(ctx context.Context, what, query string, args ...any) ([]*starflowtype.Wait, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.Wait, error) { return scanWait(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	return out, nil
}

// WakeWait implements state.Waiter: the wait is read, its run locked, and
// the wait completed by a conditional UPDATE … WHERE status = 'pending', so
// of concurrent calls exactly one succeeds.
func (s *Store) WakeWait(ctx context.Context, p *state.WakeWaitParams) (*starflowtype.Wait, error) {
	notFound := fmt.Errorf("wait %s with that token: %w", p.WaitID, starflowtype.ErrNotFound)
	if !isUUID(p.WaitID) {
		return nil, fmt.Errorf("pgstore: wake: %w", notFound)
	}
	var out *starflowtype.Wait
	_, err := s.inTxRetry(ctx, "WakeWait", "", false, func(t *txn) error {
		w, err := scanWait(t.tx.QueryRow(ctx, q("get_wait"), p.WaitID))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound
		}
		if err != nil {
			return translate(err)
		}
		if w.TokenHash == "" || w.TokenHash != p.TokenHash || (p.RunID != "" && p.RunID != w.RunID) {
			return notFound
		}
		t.ch.RunID = w.RunID
		if err := s.wake(ctx, t, w, starflowtype.WaitWoken, p.Payload, "token", true); err != nil {
			return err
		}
		out, err = t.waitChanged(ctx, w.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: wake: %w", err)
	}
	return out, nil
}

// Signal implements state.Waiter. A signal to a run locks the run first;
// a signal by key alone takes the key's advisory lock (see RegisterWait).
func (s *Store) Signal(ctx context.Context, p *state.SignalParams) (*state.SignalResult, error) {
	if err := state.CheckSignal(p); err != nil {
		return nil, fmt.Errorf("pgstore: signal: %w", err)
	}
	var res *state.SignalResult
	_, err := s.inTxRetry(ctx, "Signal", p.RunID, false, func(t *txn) error {
		res = &state.SignalResult{}
		ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
		if p.RunID != "" {
			m, status, _, _, err := t.runState(ctx, p.WorkspaceID, p.RunID)
			if err != nil {
				return err
			}
			if status.Terminal() {
				return fmt.Errorf("run %s already ended %s: %w", p.RunID, status, starflowtype.ErrConflict)
			}
			ws = m.workspace
		} else if _, err := t.exec(ctx, q("wake_lock"), s.wakeLockKey(ws, p.Signal, p.CorrelationKey)); err != nil {
			return fmt.Errorf("wake lock: %w", err)
		}
		for {
			var id string
			err := t.tx.QueryRow(ctx, q("pending_wait_for_signal"), p.RunID, ws, p.Signal, p.CorrelationKey).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				break
			}
			if err != nil {
				return translate(err)
			}
			w, err := scanWait(t.tx.QueryRow(ctx, q("get_wait"), id))
			if err != nil {
				return translate(err)
			}
			t.ch.RunID = w.RunID
			err = s.wake(ctx, t, w, starflowtype.WaitWoken, p.Payload, "signal", true)
			if errors.Is(err, starflowtype.ErrWaitClosed) {
				continue // woken by another wake meanwhile: the next one
			}
			if err != nil {
				return err
			}
			res.Wait, err = t.waitChanged(ctx, id)
			return err
		}
		e := &starflowtype.InboxEntry{ID: uuid.NewString(), WorkspaceID: ws, RunID: p.RunID, Signal: p.Signal,
			CorrelationKey: p.CorrelationKey, Payload: p.Payload}
		if err := t.tx.QueryRow(ctx, q("insert_inbox"), e.ID, ws, nullString(p.RunID), p.Signal,
			nullString(p.CorrelationKey), nullJSON(p.Payload)).Scan(&e.CreatedAt); err != nil {
			return translate(err)
		}
		e.CreatedAt = e.CreatedAt.UTC()
		res.Inbox = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: signal %s: %w", p.Signal, err)
	}
	return res, nil
}

// FireDueWaits implements state.Waiter: one transaction per wait; a wait
// another poller (or a wake) completed first is skipped.
func (s *Store) FireDueWaits(ctx context.Context, p *state.FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	rows, err := s.pool.Query(ctx, q("due_waits"), limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire due waits: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire due waits: %w", err)
	}
	var out []*starflowtype.Wait
	for _, id := range ids {
		var fired *starflowtype.Wait
		_, err := s.inTxRetry(ctx, "FireDueWaits", "", false, func(t *txn) error {
			fired = nil
			w, err := scanWait(t.tx.QueryRow(ctx, q("get_wait"), id))
			if err != nil {
				return translate(err)
			}
			var now time.Time
			if err := t.tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
				return err
			}
			status, payload, via, due := dueWake(w, now)
			if w.Status != starflowtype.WaitPending || !due {
				t.idle = true
				return nil
			}
			t.ch.RunID = w.RunID
			err = s.wake(ctx, t, w, status, payload, via, false)
			if errors.Is(err, starflowtype.ErrWaitClosed) {
				t.idle = true // completed by another transaction meanwhile
				return nil
			}
			if err != nil {
				return err
			}
			fired, err = t.waitChanged(ctx, id)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("pgstore: fire wait %s: %w", id, err)
		}
		if fired != nil {
			out = append(out, fired)
		}
	}
	return out, nil
}

// dueWake decides what the poller does with pending wait w at now: a due
// timer wakes it (payload {"fired_at": now}), else a due timeout times it
// out (payload {"timed_out": true}). When both are due the earlier wins
// (the timer on a tie).
func dueWake(w *starflowtype.Wait, now time.Time) (starflowtype.WaitStatus, json.RawMessage, string, bool) {
	timer := !w.WakeAt.IsZero() && !w.WakeAt.After(now)
	timeout := !w.ExpiresAt.IsZero() && !w.ExpiresAt.After(now)
	switch {
	case timer && (!timeout || !w.WakeAt.After(w.ExpiresAt)):
		b, _ := json.Marshal(map[string]any{"fired_at": now.UTC().Format(time.RFC3339Nano)})
		return starflowtype.WaitWoken, b, "timer", true
	case timeout:
		return starflowtype.WaitTimedOut, json.RawMessage(`{"timed_out":true}`), "timeout", true
	}
	return "", nil, "", false
}

// PendingNotifies implements state.Waiter.
func (s *Store) PendingNotifies(ctx context.Context, p *state.PendingNotifiesParams) ([]*starflowtype.Wait, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return s.queryWaits(ctx, "pending notifies", q("pending_notifies"), limit)
}

// MarkNotified implements state.Waiter.
func (s *Store) MarkNotified(ctx context.Context, p *state.MarkNotifiedParams) error {
	notFound := fmt.Errorf("wait %s: %w", p.WaitID, starflowtype.ErrNotFound)
	if !isUUID(p.WaitID) {
		return fmt.Errorf("pgstore: mark notified: %w", notFound)
	}
	_, err := s.inTx(ctx, "MarkNotified", "", false, func(t *txn) error {
		err := t.tx.QueryRow(ctx, q("mark_notified"), p.WaitID, p.Delivered, p.RetryIn.Microseconds()).Scan(&t.ch.RunID)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound
		}
		if err != nil {
			return translate(err)
		}
		_, err = t.waitChanged(ctx, p.WaitID)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: mark notified: %w", err)
	}
	return nil
}

// SessionGet implements state.Waiter.
func (s *Store) SessionGet(ctx context.Context, p *state.SessionGetParams) (*starflowtype.SessionVar, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	v, err := scanSessionVar(s.pool.QueryRow(ctx, q("session_get"), ws, p.SessionID, p.Key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %s key %q: %w", p.SessionID, p.Key, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: session get: %w", err)
	}
	return v, nil
}

// SessionSet implements state.Waiter.
func (s *Store) SessionSet(ctx context.Context, p *state.SessionSetParams) (*starflowtype.SessionVar, error) {
	if err := state.CheckSessionSet(p); err != nil {
		return nil, fmt.Errorf("pgstore: session set: %w", err)
	}
	var out *starflowtype.SessionVar
	_, err := s.inTx(ctx, "SessionSet", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		ws := orDefault(p.WorkspaceID, m.workspace)
		out, err = scanSessionVar(t.tx.QueryRow(ctx, q("session_set"), ws, p.SessionID, p.Key, string(p.Value), p.RunID, absTime(p.KeepUntil), micros(p.KeepFor)))
		if err != nil {
			return translate(err)
		}
		v := *out
		t.ch.SessionVars = append(t.ch.SessionVars, &v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: session set %s/%s: %w", p.SessionID, p.Key, err)
	}
	return out, nil
}

// DeleteExpiredSessionVars implements state.Waiter. Rows another GC pass
// holds are skipped.
func (s *Store) DeleteExpiredSessionVars(ctx context.Context, p *state.DeleteExpiredSessionVarsParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	_, err := s.inTx(ctx, "DeleteExpiredSessionVars", "", false, func(t *txn) error {
		if err := t.removedVars(ctx, q("session_gc"), limit); err != nil {
			return err
		}
		n = int64(len(t.ch.SessionVars))
		t.idle = n == 0
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: session gc: %w", err)
	}
	return n, nil
}

// WakeKeys implements state.Waiter.
func (s *Store) WakeKeys(ctx context.Context) ([]state.WakeKey, error) {
	rows, err := s.pool.Query(ctx, q("wake_keys"))
	if err != nil {
		return nil, fmt.Errorf("pgstore: wake keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.WakeKey, error) {
		var k state.WakeKey
		err := row.Scan(&k.ID, &k.Fingerprint, &k.CreatedAt)
		k.CreatedAt = k.CreatedAt.UTC()
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: wake keys: %w", err)
	}
	return out, nil
}

// AddWakeKey implements state.Waiter: the first fingerprint registered
// under an id stays (concurrent registrations agree on the one whose
// insert commits first).
func (s *Store) AddWakeKey(ctx context.Context, k state.WakeKey) (state.WakeKey, error) {
	if err := state.CheckWakeKey(k); err != nil {
		return state.WakeKey{}, fmt.Errorf("pgstore: add wake key: %w", err)
	}
	var out state.WakeKey
	_, err := s.inTx(ctx, "AddWakeKey", "", false, func(t *txn) error {
		n, err := t.exec(ctx, q("insert_wake_key"), k.ID, k.Fingerprint)
		if err != nil {
			return err
		}
		t.idle = n == 0
		if err := t.tx.QueryRow(ctx, q("get_wake_key"), k.ID).Scan(&out.ID, &out.Fingerprint, &out.CreatedAt); err != nil {
			return translate(err)
		}
		out.CreatedAt = out.CreatedAt.UTC()
		return nil
	})
	if err != nil {
		return state.WakeKey{}, fmt.Errorf("pgstore: add wake key %s: %w", k.ID, err)
	}
	return out, nil
}

// wake completes pending wait w with status and payload inside t: its run
// is locked first, then the wait row is completed conditionally
// (ErrWaitClosed when it is no longer pending, or, with checkExpiry, when
// its timeout passed), a wake_received event is appended on the wait's
// run and attempt, and the run re-queued (its pool notified) when parked.
func (s *Store) wake(ctx context.Context, t *txn, w *starflowtype.Wait, status starflowtype.WaitStatus, payload json.RawMessage, via string, checkExpiry bool) error {
	var m runMeta
	if err := t.tx.QueryRow(ctx, q("lock_run"), w.RunID).Scan(&m.workspace, &m.env, &m.attempt); err != nil {
		return fmt.Errorf("lock run %s: %w", w.RunID, translate(err))
	}
	n, err := t.exec(ctx, q("wake_wait"), w.ID, string(status), nullJSON(payload), checkExpiry)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("wait %s: %w", w.ID, starflowtype.ErrWaitClosed)
	}
	faultpoint.Hit("postgres.wake.after_wait")
	if err := t.event(ctx, m, w.RunID, w.Attempt, starflowtype.EventWakeReceived, w.StepID, w.ScopePath, state.WakePayload(w, status, via)); err != nil {
		return err
	}
	faultpoint.Hit("postgres.wake.after_event")
	var pool string
	err = t.tx.QueryRow(ctx, q("requeue_parked"), w.RunID, w.Attempt, w.ScopePath, w.StepID).Scan(&pool)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return translate(err)
	default:
		t.notify = append(t.notify, pool)
	}
	return nil
}

// waitChanged reads wait id back into the Change and returns it.
func (t *txn) waitChanged(ctx context.Context, id string) (*starflowtype.Wait, error) {
	w, err := scanWait(t.tx.QueryRow(ctx, q("get_wait"), id))
	if err != nil {
		return nil, fmt.Errorf("read back wait %s: %w", id, translate(err))
	}
	c := *w
	t.ch.Waits = append(t.ch.Waits, &c)
	return w, nil
}

// removedVars runs a DELETE … RETURNING workspace_id, session_id, key and
// records the rows as removed session variables in the Change.
func (t *txn) removedVars(ctx context.Context, query string, args ...any) error {
	rows, err := t.tx.Query(ctx, query, args...)
	if err != nil {
		return translate(err)
	}
	vars, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.SessionVar, error) {
		var v starflowtype.SessionVar
		err := row.Scan(&v.WorkspaceID, &v.SessionID, &v.Key)
		return &v, err
	})
	if err != nil {
		return translate(err)
	}
	t.ch.SessionVars = append(t.ch.SessionVars, vars...)
	return nil
}

// otherRun records run id, changed by a write addressed to another run, in
// the Change's Runs.
func (t *txn) otherRun(ctx context.Context, id string) error {
	r, err := getRun(ctx, t.tx, "", id)
	if err != nil {
		return err
	}
	t.ch.Runs = append(t.ch.Runs, r)
	return nil
}

// endRun is what every end of a run does in its transaction (state.Waiter):
// the session variables it wrote without keep_until are dropped, its
// pending waits cancelled, and its end delivered to its parent.
func (s *Store) endRun(ctx context.Context, t *txn, runID string) error {
	if err := t.removedVars(ctx, q("session_drop_run"), runID); err != nil {
		return err
	}
	if err := t.cancelWaits(ctx, q("cancel_waits"), runID); err != nil {
		return err
	}
	var parent, status, output, errText, ws string
	if err := t.tx.QueryRow(ctx, q("run_end_info"), runID).Scan(&parent, &status, &output, &errText, &ws); err != nil {
		return translate(err)
	}
	if parent == "" {
		return nil
	}
	payload := state.ChildPayload(runID, status, json.RawMessage(output), errText)
	return s.deliverChild(ctx, t, parent, runID, payload)
}

// cancelWaits runs a cancel_* query and records the waits it cancelled.
func (t *txn) cancelWaits(ctx context.Context, query string, args ...any) error {
	rows, err := t.tx.Query(ctx, query, args...)
	if err != nil {
		return translate(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return translate(err)
	}
	for _, id := range ids {
		if _, err := t.waitChanged(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// deliverChild hands a child's end to its parent (locked): the parent's
// pending child wait for it is woken (the parent re-queued when parked),
// or else an inbox row waits for that wait to register. A parent that
// ended (or is gone) gets nothing: nothing of it waits any more.
func (s *Store) deliverChild(ctx context.Context, t *txn, parent, child string, payload json.RawMessage) error {
	pm, status, _, _, err := t.runState(ctx, "", parent)
	if errors.Is(err, starflowtype.ErrNotFound) || (err == nil && status.Terminal()) {
		return nil
	}
	if err != nil {
		return err
	}
	var id string
	err = t.tx.QueryRow(ctx, q("pending_child_wait"), parent, child).Scan(&id)
	if err == nil {
		w, err := scanWait(t.tx.QueryRow(ctx, q("get_wait"), id))
		if err != nil {
			return translate(err)
		}
		if err := s.wake(ctx, t, w, starflowtype.WaitWoken, payload, "child", false); err != nil {
			return err
		}
		if _, err := t.waitChanged(ctx, id); err != nil {
			return err
		}
		return t.otherRun(ctx, parent)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return translate(err)
	}
	var created time.Time
	return translate(t.tx.QueryRow(ctx, q("insert_inbox"), uuid.NewString(), pm.workspace, parent,
		starflowtype.ChildSignal, child, string(payload)).Scan(&created))
}

// endAttempt is what the end of an attempt that the run outlives (the
// sweep, a retry) does to its waits: a wake it received but never resumed
// goes back to the inbox, for the next attempt's wait to consume, and its
// pending waits are cancelled. Call it before the attempt's steps are
// closed.
func (s *Store) endAttempt(ctx context.Context, t *txn, runID string, attempt int) error {
	type wake struct{ ws, signal, key, payload, kind string }
	rows, err := t.tx.Query(ctx, q("unresumed_wakes"), runID, attempt)
	if err != nil {
		return translate(err)
	}
	wakes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (wake, error) {
		var w wake
		err := row.Scan(&w.ws, &w.signal, &w.key, &w.payload, &w.kind)
		return w, err
	})
	if err != nil {
		return translate(err)
	}
	for _, w := range wakes {
		if _, err := t.exec(ctx, q("insert_inbox"), uuid.NewString(), w.ws, runID, w.signal,
			nullString(w.key), w.payload); err != nil {
			return err
		}
	}
	return t.cancelWaits(ctx, q("cancel_attempt_waits"), runID, attempt)
}

// wakeFromChildEnd wakes child wait w (just inserted, nothing in the
// inbox for it) from its child's stored row when that child of w's run
// has already ended: a later attempt re-attaching to the child its
// earlier attempt started (the child id does not depend on the attempt)
// finds the end even when it was delivered to that attempt's wait and
// resumed, or to no one. A child still running is left to deliver its
// end itself: it locks this (parent) run, which RegisterWait holds, so
// it sees the wait once this transaction commits.
func (s *Store) wakeFromChildEnd(ctx context.Context, t *txn, w *starflowtype.Wait, child string) error {
	if !isUUID(child) {
		return nil // no run has that id
	}
	var status, output, errText string
	err := t.tx.QueryRow(ctx, q("child_end"), child, w.RunID).Scan(&status, &output, &errText)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(err)
	}
	payload := state.ChildPayload(child, status, json.RawMessage(output), errText)
	return s.wake(ctx, t, w, starflowtype.WaitWoken, payload, "child", false)
}

// cancelTree cancels run id (as CancelRun does) and then its non-terminal
// children, recursively, each locked as it is reached. top: the run the
// operator named (a terminal one is ErrConflict); children that ended
// meanwhile are left alone.
func (s *Store) cancelTree(ctx context.Context, t *txn, workspace, id string, top bool, depth int) error {
	if depth > maxCancelDepth {
		return fmt.Errorf("run %s: child runs nested deeper than %d", id, maxCancelDepth)
	}
	m, status, claim, _, err := t.runState(ctx, workspace, id)
	if err != nil {
		return err
	}
	switch {
	case status.Terminal():
		if top {
			return fmt.Errorf("run %s already ended %s: %w", id, status, starflowtype.ErrConflict)
		}
		return nil
	case claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning:
		if _, err := t.exec(ctx, q("run_cancel_requested"), id); err != nil {
			return err
		}
	default:
		if _, err := t.exec(ctx, q("run_cancelled"), id); err != nil {
			return err
		}
		if _, err := t.exec(ctx, q("steps_cancelled"), id, m.attempt); err != nil {
			return err
		}
		by := "operator"
		if !top {
			by = "parent"
		}
		payload, _ := json.Marshal(map[string]any{"by": by})
		if err := t.event(ctx, m, id, 0, starflowtype.EventRunCancelled, "", "", payload); err != nil {
			return err
		}
		if err := s.endRun(ctx, t, id); err != nil {
			return err
		}
	}
	return s.cancelChildren(ctx, t, id, depth)
}

// cancelChildren cancels the non-terminal children of run id (at depth
// of the cascade) as cancelTree does, recursively, each locked as it is
// reached, and lists them in the Change's Runs. Callers run in
// inTxRetry: the parent is locked before its children.
func (s *Store) cancelChildren(ctx context.Context, t *txn, id string, depth int) error {
	rows, err := t.tx.Query(ctx, q("children"), id)
	if err != nil {
		return translate(err)
	}
	children, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return translate(err)
	}
	for _, c := range children {
		if err := s.cancelTree(ctx, t, "", c, false, depth+1); err != nil {
			return err
		}
		if err := t.otherRun(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// cancelParked ends run id, just parked with cancel_requested, as an
// immediate cancel does, children included: a workflow_call may have
// started its child after CancelRun cascaded.
func (s *Store) cancelParked(ctx context.Context, t *txn, id string) error {
	m, _, _, _, err := t.runState(ctx, "", id)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, q("run_cancelled"), id); err != nil {
		return err
	}
	if _, err := t.exec(ctx, q("steps_cancelled"), id, m.attempt); err != nil {
		return err
	}
	payload, _ := json.Marshal(map[string]any{"by": "operator", "at": "park"})
	if err := t.event(ctx, m, id, 0, starflowtype.EventRunCancelled, "", "", payload); err != nil {
		return err
	}
	if err := s.endRun(ctx, t, id); err != nil {
		return err
	}
	return s.cancelChildren(ctx, t, id, 0)
}

func scanWait(sc scanner) (*starflowtype.Wait, error) {
	var w starflowtype.Wait
	var kind, status string
	var wakeAt, expiresAt, notifiedAt, consumedAt *time.Time
	var payload, notify *string
	err := sc.Scan(&w.ID, &w.RunID, &w.WorkspaceID, &w.Attempt, &w.ScopePath, &w.StepID, &kind,
		&w.Signal, &w.CorrelationKey, &w.TokenHash, &w.KeyID, &wakeAt, &expiresAt, &status,
		&payload, &notify, &notifiedAt, &w.NotifyTries, &w.CreatedAt, &consumedAt)
	if err != nil {
		return nil, err
	}
	w.Kind = starflowtype.WaitKind(kind)
	w.Status = starflowtype.WaitStatus(status)
	w.WakeAt = utc(wakeAt)
	w.ExpiresAt = utc(expiresAt)
	w.NotifiedAt = utc(notifiedAt)
	w.ConsumedAt = utc(consumedAt)
	w.CreatedAt = w.CreatedAt.UTC()
	if payload != nil {
		w.Payload = json.RawMessage(*payload)
	}
	if notify != nil {
		w.Notify = json.RawMessage(*notify)
	}
	return &w, nil
}

func scanSessionVar(sc scanner) (*starflowtype.SessionVar, error) {
	var v starflowtype.SessionVar
	var value string
	var keep *time.Time
	if err := sc.Scan(&v.WorkspaceID, &v.SessionID, &v.Key, &value, &v.OriginRunID, &keep, &v.UpdatedAt); err != nil {
		return nil, err
	}
	v.Value = json.RawMessage(value)
	v.KeepUntil = utc(keep)
	v.UpdatedAt = v.UpdatedAt.UTC()
	return &v, nil
}

// wakeLockKey is the advisory lock key of signals by correlation key
// (workspace, signal, key) in this store's schema.
func (s *Store) wakeLockKey(workspace, signal, key string) int64 {
	sum := sha256.Sum256([]byte("starflow wake\x00" + s.cfg.Schema + "\x00" + workspace + "\x00" + signal + "\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// absTime is t, or NULL when zero.
func absTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// micros is d in microseconds, or NULL when not positive.
func micros(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return d.Microseconds()
}
