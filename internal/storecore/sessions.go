package storecore

import (
	"context"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// SessionGet implements state.Waiter.
func (s *Store) SessionGet(ctx context.Context, p *state.SessionGetParams) (*starflowtype.SessionVar, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	v, err := scanSessionVar(s.reader().QueryRow(ctx, "session_get", ws, p.SessionID, p.Key))
	if isNoRows(err) {
		return nil, fmt.Errorf("session %s key %q: %w", p.SessionID, p.Key, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, s.errorf("session get: %w", err)
	}
	return v, nil
}

// SessionSet implements state.Waiter. A write with a RunID is fenced by
// its lease and marks the run (its end drops the variable unless kept);
// one without is an operator's: no fence, no origin run, and without
// KeepUntil or KeepFor no keep_until either, so neither a run's end nor
// the session GC removes it.
func (s *Store) SessionSet(ctx context.Context, p *state.SessionSetParams) (*starflowtype.SessionVar, error) {
	if err := state.CheckSessionSet(p); err != nil {
		return nil, s.errorf("session set: %w", starflowtype.Invalid(err))
	}
	var out *starflowtype.SessionVar
	_, err := s.write(ctx, state.OpSessionSet, p.RunID, false, func(t *txn) error {
		ws, origin := orDefault(p.WorkspaceID, state.DefaultWorkspace), any(nil)
		if p.RunID != "" {
			m, err := t.fenceMark(ctx, p.RunID, p.Lease, endSessionVars)
			if err != nil {
				return err
			}
			ws, origin = orDefault(p.WorkspaceID, m.workspace), m.id
		}
		var err error
		out, err = scanSessionVar(t.tx.QueryRow(ctx, "session_set", ws, p.SessionID, p.Key, string(p.Value), origin,
			instant(p.KeepUntil), offset(p.KeepFor)))
		if err != nil {
			return err
		}
		v := *out
		t.ch.SessionVars = append(t.ch.SessionVars, &v)
		return nil
	})
	if err != nil {
		return nil, s.errorf("session set %s/%s: %w", p.SessionID, p.Key, err)
	}
	return out, nil
}

// SessionList implements state.Operator.
func (s *Store) SessionList(ctx context.Context, p *state.SessionListParams) ([]*starflowtype.SessionVar, error) {
	rows, err := s.reader().Query(ctx, "session_list", orDefault(p.WorkspaceID, state.DefaultWorkspace), p.SessionID)
	if err != nil {
		return nil, s.errorf("session list %s: %w", p.SessionID, err)
	}
	defer rows.Close()
	var out []*starflowtype.SessionVar
	for rows.Next() {
		v, err := scanSessionVar(rows)
		if err != nil {
			return nil, s.errorf("session list %s: %w", p.SessionID, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("session list %s: %w", p.SessionID, err)
	}
	return out, nil
}

// SessionDelete implements state.Operator. The removed variable is in the
// Change (with a nil Value), as the session GC's are.
func (s *Store) SessionDelete(ctx context.Context, p *state.SessionDeleteParams) error {
	_, err := s.write(ctx, state.OpSessionDelete, "", false, func(t *txn) error {
		t.ch.SessionVars = nil
		if err := t.removedVars(ctx, "session_delete", orDefault(p.WorkspaceID, state.DefaultWorkspace), p.SessionID, p.Key); err != nil {
			return err
		}
		if len(t.ch.SessionVars) == 0 {
			return fmt.Errorf("session %s key %q: %w", p.SessionID, p.Key, starflowtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		if isNotFound(err) {
			return err
		}
		return s.errorf("session delete %s/%s: %w", p.SessionID, p.Key, err)
	}
	return nil
}

// DeleteExpiredSessionVars implements state.Waiter. Rows another GC pass
// holds are skipped (PostgreSQL: SKIP LOCKED).
func (s *Store) DeleteExpiredSessionVars(ctx context.Context, p *state.DeleteExpiredSessionVarsParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	_, err := s.write(ctx, state.OpDeleteExpiredSessionVars, "", false, func(t *txn) error {
		t.ch.SessionVars = nil
		if err := t.removedVars(ctx, "session_gc", limit); err != nil {
			return err
		}
		n = int64(len(t.ch.SessionVars))
		t.idle = n == 0
		return nil
	})
	if err != nil {
		return 0, s.errorf("session gc: %w", err)
	}
	return n, nil
}

// removedVars runs a DELETE … RETURNING workspace_id, session_id, key and
// records the rows as removed session variables in the Change.
func (t *txn) removedVars(ctx context.Context, name string, args ...any) error {
	rows, err := t.tx.Query(ctx, name, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v starflowtype.SessionVar
		if err := rows.Scan(&v.WorkspaceID, &v.SessionID, &v.Key); err != nil {
			return err
		}
		t.ch.SessionVars = append(t.ch.SessionVars, &v)
	}
	return rows.Err()
}

// WakeKeys implements state.Waiter.
func (s *Store) WakeKeys(ctx context.Context) ([]state.WakeKey, error) {
	rows, err := s.reader().Query(ctx, "wake_keys")
	if err != nil {
		return nil, s.errorf("wake keys: %w", err)
	}
	defer rows.Close()
	var out []state.WakeKey
	for rows.Next() {
		var k state.WakeKey
		if err := rows.Scan(&k.ID, &k.Fingerprint, &k.CreatedAt); err != nil {
			return nil, s.errorf("wake keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("wake keys: %w", err)
	}
	return out, nil
}

// AddWakeKey implements state.Waiter: the first fingerprint registered
// under an id stays (concurrent registrations agree on the one whose
// insert commits first).
func (s *Store) AddWakeKey(ctx context.Context, k state.WakeKey) (state.WakeKey, error) {
	if err := state.CheckWakeKey(k); err != nil {
		return state.WakeKey{}, s.errorf("add wake key: %w", err)
	}
	var out state.WakeKey
	_, err := s.write(ctx, state.OpAddWakeKey, "", false, func(t *txn) error {
		n, err := t.tx.Exec(ctx, "insert_wake_key", k.ID, k.Fingerprint)
		if err != nil {
			return err
		}
		t.idle = n == 0
		return t.tx.QueryRow(ctx, "get_wake_key", k.ID).Scan(&out.ID, &out.Fingerprint, &out.CreatedAt)
	})
	if err != nil {
		return state.WakeKey{}, s.errorf("add wake key %s: %w", k.ID, err)
	}
	return out, nil
}
