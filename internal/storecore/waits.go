package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// OnRunPaused implements state.Waiter (commit boundary 1).
func (s *Store) OnRunPaused(ctx context.Context, p *state.RunPausedParams) error {
	payload, err := state.PausedPayload(p)
	if err != nil {
		return s.errorf("run paused: %w", err)
	}
	_, err = s.write(ctx, state.OpRunPaused, p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if m.cancel {
			// As OnNodeStart: a run being cancelled enters no wait (and
			// so a workflow_call starts no child for it).
			return fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrCancelRequested)
		}
		if _, err := t.tx.Exec(ctx, "run_paused", jsonNull(p.Snapshot), m.id); err != nil {
			return err
		}
		st, err := scanStep(t.tx.QueryRow(ctx, "step_waiting", m.id, p.Attempt, p.ScopePath, p.StepID, m.workspace, m.env, p.Kind))
		if isNoRows(err) {
			return fmt.Errorf("step %q already succeeded: %w", p.StepID, starflowtype.ErrConflict)
		}
		if err != nil {
			return err
		}
		if p.Phase != "" {
			if err := t.setPhase(ctx, m, m.id, p.Phase); err != nil {
				return err
			}
		}
		if err := t.event(ctx, m, m.id, p.Attempt, starflowtype.EventRunPaused, p.StepID, p.ScopePath, payload); err != nil {
			return err
		}
		t.ch.Steps = append(t.ch.Steps, st)
		return nil
	})
	if err != nil {
		return s.errorf("run paused %s: %w", p.StepID, err)
	}
	return nil
}

// RegisterWait implements state.Waiter (commit boundary 2). A wait with a
// correlation key takes the key's lock (Dialect.Lock), as Signal by key
// does, so that a signal by key and the registration of its wait never
// both miss each other.
func (s *Store) RegisterWait(ctx context.Context, p *state.RegisterWaitParams) (*starflowtype.Wait, error) {
	signal, err := state.CheckRegisterWait(p)
	if err != nil {
		return nil, s.errorf("register wait: %w", err)
	}
	id := p.ID
	if id == "" {
		id = uuid.NewString()
	} else if id, err = checkID("wait id", id); err != nil {
		return nil, s.errorf("register wait: %w", err)
	}
	var out *starflowtype.Wait
	_, err = s.write(ctx, state.OpRegisterWait, p.RunID, false, func(t *txn) error {
		m, err := t.fenceMark(ctx, p.RunID, p.Lease, endWaits)
		if err != nil {
			return err
		}
		existing, err := scanWait(t.tx.QueryRow(ctx, "get_wait_by_step", m.id, p.Attempt, p.ScopePath, p.StepID))
		if err == nil {
			out = existing // re-entered after a crash: registered once
			return nil
		}
		if !isNoRows(err) {
			return err
		}
		if p.CorrelationKey != "" && p.Kind != starflowtype.WaitTimer {
			if err := s.d.Lock(ctx, t.tx.Conn(), wakeLockKey(m.workspace, signal, p.CorrelationKey)); err != nil {
				return fmt.Errorf("wake lock: %w", err)
			}
		}
		if _, err := t.tx.Exec(ctx, "insert_wait", id, m.id, m.workspace, p.Attempt, p.ScopePath, p.StepID,
			string(p.Kind), nullString(signal), nullString(p.CorrelationKey),
			instant(p.WakeAt), offset(p.WakeIn), instant(p.ExpiresAt), offset(p.ExpiresIn),
			nullString(p.TokenHash), nullString(p.KeyID), jsonNull(p.Notify), max(p.NotifyGrace, 0), jsonNull(p.Form)); err != nil {
			return err
		}
		if p.Kind != starflowtype.WaitTimer {
			var inboxID string
			var payload []byte
			err := t.tx.QueryRow(ctx, "inbox_match", m.id, m.workspace, signal, p.CorrelationKey).Scan(&inboxID, &payload)
			w := &starflowtype.Wait{ID: id, RunID: m.id, Kind: p.Kind, Signal: signal, StepID: p.StepID, ScopePath: p.ScopePath, Attempt: p.Attempt}
			switch {
			case isNoRows(err):
				if p.Kind == starflowtype.WaitChild {
					if err := t.wakeFromChildEnd(ctx, w, p.CorrelationKey); err != nil {
						return err
					}
				}
				if p.Kind == starflowtype.WaitJob {
					if err := t.insertJob(ctx, w, m.workspace, m.env, p.Job); err != nil {
						return err
					}
				}
			case err != nil:
				return err
			default:
				if err := t.mustAffect(ctx, "inbox_consume", inboxID); err != nil {
					return fmt.Errorf("consume inbox entry %s: %w", inboxID, err)
				}
				if err := t.wake(ctx, w, starflowtype.WaitWoken, payload, "inbox", false); err != nil {
					return err
				}
			}
		}
		out, err = t.waitChanged(ctx, id)
		return err
	})
	if err != nil {
		return nil, s.errorf("register wait %s: %w", p.StepID, err)
	}
	return out, nil
}

// ParkRun implements state.Waiter (commit boundary 3). A run queued at
// once has its pool notified.
func (s *Store) ParkRun(ctx context.Context, p *state.ParkRunParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpParkRun, p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var claim, pool string
		err = t.tx.QueryRow(ctx, "park_run", m.id).Scan(&claim, &pool)
		if isNoRows(err) {
			return fmt.Errorf("run %s is not paused (OnRunPaused comes first): %w", p.RunID, starflowtype.ErrConflict)
		}
		if err != nil {
			return err
		}
		if m.cancel {
			// An operator cancelled the run while it entered its wait: no
			// runner would ever see the request, so the cancel ends it here.
			return t.cancelParked(ctx, m.id)
		}
		if claim == string(starflowtype.ClaimQueued) {
			t.notify = append(t.notify, pool)
		}
		return nil
	})
	if err != nil {
		return nil, s.errorf("park run: %w", err)
	}
	return run, nil
}

// GetWait implements state.Waiter.
func (s *Store) GetWait(ctx context.Context, p *state.GetWaitParams) (*starflowtype.Wait, error) {
	notFound := fmt.Errorf("wait %s%s/%s: %w", p.ID, p.ScopePath, p.StepID, starflowtype.ErrNotFound)
	var row Row
	if p.ID != "" {
		id, ok := CanonicalID(p.ID)
		if !ok {
			return nil, notFound
		}
		row = s.reader().QueryRow(ctx, "get_wait", id)
	} else {
		id, ok := CanonicalID(p.RunID)
		if !ok {
			return nil, notFound
		}
		row = s.reader().QueryRow(ctx, "get_wait_by_step", id, p.Attempt, p.ScopePath, p.StepID)
	}
	w, err := scanWait(row)
	if isNoRows(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, s.errorf("get wait: %w", err)
	}
	return w, nil
}

// ListWaits implements state.Waiter.
func (s *Store) ListWaits(ctx context.Context, p *state.ListWaitsParams) ([]*starflowtype.Wait, error) {
	runID := p.RunID
	if runID != "" {
		var ok bool
		if runID, ok = CanonicalID(runID); !ok {
			return nil, nil
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses := make([]string, len(p.Status))
	for i, st := range p.Status {
		statuses[i] = string(st)
	}
	return s.queryWaits(ctx, "list waits", "list_waits", runID, statuses, limit)
}

func (s *Store) queryWaits(ctx context.Context, what, name string, args ...any) ([]*starflowtype.Wait, error) {
	rows, err := s.reader().Query(ctx, name, args...)
	if err != nil {
		return nil, s.errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []*starflowtype.Wait
	for rows.Next() {
		w, err := scanWait(rows)
		if err != nil {
			return nil, s.errorf("%s: %w", what, err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("%s: %w", what, err)
	}
	return out, nil
}

// WakeWait implements state.Waiter: the wait is read, its run locked, and
// the wait completed by a conditional UPDATE … WHERE status = 'pending', so
// of concurrent calls exactly one succeeds.
func (s *Store) WakeWait(ctx context.Context, p *state.WakeWaitParams) (*starflowtype.Wait, error) {
	notFound := fmt.Errorf("wait %s with that token: %w", p.WaitID, starflowtype.ErrNotFound)
	waitID, ok := CanonicalID(p.WaitID)
	if !ok {
		return nil, s.errorf("wake: %w", notFound)
	}
	var out *starflowtype.Wait
	_, err := s.write(ctx, state.OpWakeWait, "", false, func(t *txn) error {
		w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", waitID))
		if isNoRows(err) {
			return notFound
		}
		if err != nil {
			return err
		}
		if w.TokenHash == "" || w.TokenHash != p.TokenHash || (p.RunID != "" && !sameID(p.RunID, w.RunID)) {
			return notFound
		}
		t.ch.RunID = w.RunID
		if err := t.wake(ctx, w, starflowtype.WaitWoken, p.Payload, "token", true); err != nil {
			return err
		}
		out, err = t.waitChanged(ctx, w.ID)
		return err
	})
	if err != nil {
		return nil, s.errorf("wake: %w", err)
	}
	return out, nil
}

// sameID reports whether a (any uuid form) names stored id b.
func sameID(a, b string) bool {
	c, ok := CanonicalID(a)
	return ok && c == b
}

// Signal implements state.Waiter. A signal to a run locks the run first;
// a signal by key alone takes the key's lock (see RegisterWait).
func (s *Store) Signal(ctx context.Context, p *state.SignalParams) (*state.SignalResult, error) {
	if err := state.CheckSignal(p); err != nil {
		return nil, s.errorf("signal: %w", err)
	}
	var res *state.SignalResult
	_, err := s.write(ctx, state.OpSignal, p.RunID, false, func(t *txn) error {
		res = &state.SignalResult{}
		ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
		runID := ""
		if p.RunID != "" {
			m, status, _, _, err := t.runState(ctx, p.WorkspaceID, p.RunID)
			if err != nil {
				return err
			}
			if status.Terminal() {
				return fmt.Errorf("run %s already ended %s: %w", p.RunID, status, starflowtype.ErrConflict)
			}
			ws, runID, t.ch.RunID = m.workspace, m.id, m.id
		} else if err := s.d.Lock(ctx, t.tx.Conn(), wakeLockKey(ws, p.Signal, p.CorrelationKey)); err != nil {
			return fmt.Errorf("wake lock: %w", err)
		}
		for {
			var id string
			err := t.tx.QueryRow(ctx, "pending_wait_for_signal", runID, ws, p.Signal, p.CorrelationKey).Scan(&id)
			if isNoRows(err) {
				break
			}
			if err != nil {
				return err
			}
			w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", id))
			if err != nil {
				return err
			}
			t.ch.RunID = w.RunID
			err = t.wake(ctx, w, starflowtype.WaitWoken, p.Payload, "signal", true)
			if errors.Is(err, starflowtype.ErrWaitClosed) {
				continue // woken by another wake meanwhile: the next one
			}
			if err != nil {
				return err
			}
			res.Wait, err = t.waitChanged(ctx, id)
			return err
		}
		e := &starflowtype.InboxEntry{ID: uuid.NewString(), WorkspaceID: ws, RunID: runID, Signal: p.Signal,
			CorrelationKey: p.CorrelationKey, Payload: p.Payload}
		if err := t.tx.QueryRow(ctx, "insert_inbox", e.ID, ws, nullString(runID), p.Signal,
			nullString(p.CorrelationKey), jsonNull(p.Payload)).Scan(&e.CreatedAt); err != nil {
			return err
		}
		res.Inbox = e
		return nil
	})
	if err != nil {
		return nil, s.errorf("signal %s: %w", p.Signal, err)
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
	ids, err := queryStrings(ctx, s.reader(), "due_waits", limit)
	if err != nil {
		return nil, s.errorf("fire due waits: %w", err)
	}
	var out []*starflowtype.Wait
	for _, id := range ids {
		var fired *starflowtype.Wait
		_, err := s.write(ctx, state.OpFireDueWaits, "", false, func(t *txn) error {
			fired = nil
			w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", id))
			if err != nil {
				return err
			}
			var now time.Time
			if err := t.tx.QueryRow(ctx, "now").Scan(&now); err != nil {
				return err
			}
			status, payload, via, due := dueWake(w, now)
			if w.Status != starflowtype.WaitPending || !due {
				t.idle = true
				return nil
			}
			t.ch.RunID = w.RunID
			err = t.wake(ctx, w, status, payload, via, false)
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
			return out, s.errorf("fire wait %s: %w", id, err)
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
		return starflowtype.WaitWoken, marshal(map[string]any{"fired_at": now.UTC().Format(time.RFC3339Nano)}), "timer", true
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
	return s.queryWaits(ctx, "pending notifies", "pending_notifies", limit)
}

// MarkNotified implements state.Waiter.
func (s *Store) MarkNotified(ctx context.Context, p *state.MarkNotifiedParams) error {
	notFound := fmt.Errorf("wait %s: %w", p.WaitID, starflowtype.ErrNotFound)
	waitID, ok := CanonicalID(p.WaitID)
	if !ok {
		return s.errorf("mark notified: %w", notFound)
	}
	_, err := s.write(ctx, state.OpMarkNotified, "", false, func(t *txn) error {
		err := t.tx.QueryRow(ctx, "mark_notified", waitID, p.Delivered, p.RetryIn).Scan(&t.ch.RunID)
		if isNoRows(err) {
			return notFound
		}
		if err != nil {
			return err
		}
		_, err = t.waitChanged(ctx, waitID)
		return err
	})
	if err != nil {
		return s.errorf("mark notified: %w", err)
	}
	return nil
}

// wake completes pending wait w with status and payload inside t: its run
// is locked first, then the wait row is completed conditionally
// (ErrWaitClosed when it is no longer pending, or, with checkExpiry, when
// its timeout passed), a wake_received event is appended on the wait's
// run and attempt, and the run re-queued (its pool notified) when parked.
func (t *txn) wake(ctx context.Context, w *starflowtype.Wait, status starflowtype.WaitStatus, payload []byte, via string, checkExpiry bool) error {
	m := runMeta{id: w.RunID}
	if err := t.tx.QueryRow(ctx, "lock_run", w.RunID).Scan(&m.workspace, &m.env, &m.attempt); err != nil {
		return fmt.Errorf("lock run %s: %w", w.RunID, err)
	}
	n, err := t.tx.Exec(ctx, "wake_wait", w.ID, string(status), jsonNull(payload), checkExpiry)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("wait %s: %w", w.ID, starflowtype.ErrWaitClosed)
	}
	if err := t.closeJob(ctx, w); err != nil {
		return err
	}
	name := t.s.d.Name()
	faultpoint.Hit(name + ".wake.after_wait")
	if err := t.event(ctx, m, w.RunID, w.Attempt, starflowtype.EventWakeReceived, w.StepID, w.ScopePath, state.WakePayload(w, status, via)); err != nil {
		return err
	}
	faultpoint.Hit(name + ".wake.after_event")
	var pool string
	err = t.tx.QueryRow(ctx, "requeue_parked", w.RunID, w.Attempt, w.ScopePath, w.StepID).Scan(&pool)
	switch {
	case isNoRows(err):
	case err != nil:
		return err
	default:
		t.notify = append(t.notify, pool)
	}
	return nil
}

// wakeFromChildEnd wakes child wait w (just inserted, nothing in the
// inbox for it) from its child's stored row when that child of w's run
// has already ended: a later attempt re-attaching to the child its
// earlier attempt started (the child id does not depend on the attempt)
// finds the end even when it was delivered to that attempt's wait and
// resumed, or to no one. A child still running is left to deliver its
// end itself: it locks this (parent) run, which RegisterWait holds, so
// it sees the wait once this transaction commits.
func (t *txn) wakeFromChildEnd(ctx context.Context, w *starflowtype.Wait, child string) error {
	id, ok := CanonicalID(child)
	if !ok {
		return nil // no run has that id
	}
	var status, errText string
	var output, errJSON []byte
	err := t.tx.QueryRow(ctx, "child_end", id, w.RunID).Scan(&status, &output, &errText, &errJSON)
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return t.wake(ctx, w, starflowtype.WaitWoken, state.ChildPayload(id, status, output, errText, errJSON), "child", false)
}

// waitChanged reads wait id back into the Change and returns it.
func (t *txn) waitChanged(ctx context.Context, id string) (*starflowtype.Wait, error) {
	w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", id))
	if err != nil {
		return nil, fmt.Errorf("read back wait %s: %w", id, err)
	}
	c := *w
	t.ch.Waits = append(t.ch.Waits, &c)
	return w, nil
}

// cancelWaits runs a cancel_* query (RETURNING the ids) and records the
// waits it cancelled.
func (t *txn) cancelWaits(ctx context.Context, name string, args ...any) error {
	ids, err := t.strings(ctx, name, args...)
	if err != nil {
		return err
	}
	for _, id := range ids {
		w, err := t.waitChanged(ctx, id)
		if err != nil {
			return err
		}
		if err := t.closeJob(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// wakeLockKey names the lock of signals by correlation key (workspace,
// signal, key); the dialect hashes it (with its schema) into its lock.
func wakeLockKey(workspace, signal, key string) string {
	return "starflow wake\x00" + workspace + "\x00" + signal + "\x00" + key
}
