package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// txn is one write transaction and the Change it accumulates for hooks.
type txn struct {
	tx pgx.Tx
	ch *state.Change
	// idle: the transaction wrote nothing (a claim that found no run, a
	// duplicate enqueue), so no hook runs for it.
	idle bool
	// notify lists the pools to wake when the transaction commits (one
	// pg_notify each, sent just before the hooks run).
	notify []string
}

// runMeta is what the fence returns about the fenced run.
type runMeta struct {
	workspace, env string
	attempt        int
	cancel         bool   // cancel_requested
	status         string // before the write
	parent         string // parent_run_id, "" when none
}

// inTx runs fn in one transaction from the pool, then the notifications and
// the hooks, then commits. Any error rolls back.
//
// When readRun is set or hooks need it, inTx reads the run the Change
// names (t.ch.RunID, which fn may set) inside the transaction, after fn's
// writes, and returns it, unless fn already set t.ch.Run from a RETURNING
// clause of the last statement that changed the run. A method that
// returns the run it wrote thus reports exactly what it committed.
//
// Errors are returned unprefixed: every caller wraps them with its own
// "pgstore: <operation>:" prefix.
func (s *Store) inTx(ctx context.Context, op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	run, err := s.within(ctx, tx, op, runID, readRun, fn)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	faultpoint.Hit("postgres." + op + ".before_commit")
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", translate(err))
	}
	return run, nil
}

// within is the body of inTx on an open transaction (the store's own, or a
// caller's savepoint for EnqueueTx): fn, then the run read back, the
// notifications and the hooks. It neither commits nor rolls back.
func (s *Store) within(ctx context.Context, tx pgx.Tx, op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	t := &txn{tx: tx, ch: &state.Change{Op: op, RunID: runID}}
	if err := fn(t); err != nil {
		return nil, err
	}
	hooks := s.cfg.Hooks
	if t.idle {
		hooks = nil
	}
	if t.ch.RunID != "" && t.ch.Run == nil && (readRun || len(hooks) > 0) {
		r, err := getRun(ctx, tx, "", t.ch.RunID)
		if err != nil {
			return nil, fmt.Errorf("read back run: %w", err)
		}
		t.ch.Run = r
	}
	for _, pool := range t.notify {
		if _, err := tx.Exec(ctx, q("notify"), s.channel, pool); err != nil {
			return nil, fmt.Errorf("notify: %w", translate(err))
		}
	}
	for _, h := range hooks {
		if err := h(ctx, hookTx{tx}, "postgres", t.ch); err != nil {
			return nil, fmt.Errorf("hook: %w", err)
		}
	}
	if t.ch.Run == nil {
		return nil, nil
	}
	run := *t.ch.Run // the caller's copy: hooks keep theirs
	return &run, nil
}

// fence is the conditional write of SPEC §4. It matches exactly one row or
// returns ErrLeaseLost.
func (t *txn) fence(ctx context.Context, runID string, l starflowtype.Lease) (runMeta, error) {
	var m runMeta
	lost := fmt.Errorf("run %s, runner %s, epoch %d: %w", runID, l.RunnerID, l.Epoch, starflowtype.ErrLeaseLost)
	if !isUUID(runID) {
		return m, lost // no such run can exist
	}
	err := t.tx.QueryRow(ctx, q("fence"), runID, l.RunnerID, l.Epoch).Scan(&m.workspace, &m.env, &m.attempt, &m.cancel, &m.status, &m.parent)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, lost
	}
	if err != nil {
		return m, fmt.Errorf("fence: %w", translate(err))
	}
	return m, nil
}

// blob stores data in workflow_blobs when it is larger than threshold.
// It returns what the checkpoint row keeps in the JSON column (data itself,
// or the reference placeholder) and the value of its blob column: the
// blob's sha256, or nil when data is kept inline. Only that column marks a
// reference (state.BlobRef).
func (t *txn) blob(ctx context.Context, threshold int, data []byte) ([]byte, any, error) {
	if len(data) <= threshold {
		return data, nil, nil
	}
	ref, sum := state.BlobRef(data)
	if _, err := t.exec(ctx, q("insert_blob"), sum, len(data), data); err != nil {
		return nil, nil, fmt.Errorf("blob: %w", err)
	}
	return ref, sum, nil
}

// event appends one workflow_run_events row and records it in the Change.
func (t *txn) event(ctx context.Context, m runMeta, runID string, attempt int, typ starflowtype.EventType, node, scope string, payload json.RawMessage) error {
	if attempt == 0 {
		attempt = m.attempt
	}
	ev := &starflowtype.Event{RunID: runID, Attempt: attempt, Type: typ, NodeID: node, ScopePath: scope, Payload: payload}
	err := t.tx.QueryRow(ctx, q("insert_event"), runID, m.workspace, m.env, attempt, string(typ),
		nullString(node), scope, nullJSON(payload)).Scan(&ev.ID, &ev.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert %s event: %w", typ, translate(err))
	}
	ev.CreatedAt = ev.CreatedAt.UTC()
	t.ch.Events = append(t.ch.Events, ev)
	return nil
}

// exec runs a statement and translates its error.
func (t *txn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}

// mustAffect runs a statement that must change exactly one row; ErrConflict
// when it changes none.
func (t *txn) mustAffect(ctx context.Context, query string, args ...any) error {
	n, err := t.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if n != 1 {
		return starflowtype.ErrConflict
	}
	return nil
}

// hookTx adapts a pgx.Tx to state.Tx for hooks.
type hookTx struct{ tx pgx.Tx }

func (h hookTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := h.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (h hookTx) Query(ctx context.Context, query string, args ...any) (state.Rows, error) {
	rows, err := h.tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (h hookTx) QueryRow(ctx context.Context, query string, args ...any) state.Row {
	return h.tx.QueryRow(ctx, query, args...)
}

// PostgreSQL error codes that translate maps to sentinel errors.
const (
	codeUniqueViolation = "23505"
)

// translate maps driver errors to the sentinel errors of starflowtype: a
// unique violation is ErrConflict.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation {
		return fmt.Errorf("%w: %v", starflowtype.ErrConflict, err)
	}
	return err
}

// isUUID reports whether s is a uuid in a form PostgreSQL accepts; an id
// that is not cannot name any row.
func isUUID(s string) bool {
	_, err := canonicalUUID(s)
	return err == nil
}

// canonicalUUID returns s in PostgreSQL's text form (lower case, hyphens),
// the form every id is read back in. It accepts the forms both uuid.Parse
// and PostgreSQL accept (not uuid.Parse's "urn:uuid:" prefix).
func canonicalUUID(s string) (string, error) {
	u, err := uuid.Parse(s)
	if err != nil || len(s) == len("urn:uuid:")+36 {
		return "", fmt.Errorf("%q is not a uuid", s)
	}
	return u.String(), nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func jsonOrNull(b json.RawMessage, empty string) string {
	if len(b) == 0 {
		return empty
	}
	return string(b)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
