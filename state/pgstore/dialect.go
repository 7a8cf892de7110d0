package pgstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/starflow/starflow/internal/sqlq"
	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
)

//go:embed queries.sql
var queriesSQL string

// Queries holds every statement of queries.sql by name, with the column
// lists substituted and the shared parts (blocks named _*, written
// /*_name*/ where they go) put in; the step writes' one-statement forms
// (sw_*) are assembled from their parts, each in two variants (the *_run
// one returns the whole run row, for hooks).
var Queries = func() map[string]string {
	m := sqlq.MustParse(queriesSQL)
	parts := sharedParts(m)
	for name, text := range m {
		text = parts.Replace(text)
		text = strings.Replace(text, "/*run_columns*/", runColumns, 1)
		text = strings.Replace(text, "/*step_columns*/", stepColumns, 1)
		text = strings.Replace(text, "/*wait_columns*/", waitColumns, 1)
		if !strings.HasPrefix(name, "sw_") {
			m[name] = text
			continue
		}
		text = strings.ReplaceAll(text, "/*step_returning*/", aliased("st.", stepColumns, "s"))
		text = strings.Replace(text, "/*step_select*/", ", "+selected("s.", "s", 12), 1)
		m[name] = strings.NewReplacer("/*run_returning*/", "r.id", "/*run_select*/", "").Replace(text)
		m[name+"_run"] = strings.NewReplacer("/*run_returning*/", aliased("r.", runColumns, "r"),
			"/*run_select*/", ", "+selected("u.", "r", len(splitColumns(runColumns)))).Replace(text)
	}
	return m
}()

// sharedParts removes the blocks whose name starts with "_" from m and
// returns the replacer that puts each where /*_name*/ marks it.
func sharedParts(m map[string]string) *strings.Replacer {
	var pairs []string
	for name, text := range m {
		if strings.HasPrefix(name, "_") {
			pairs = append(pairs, "/*"+name+"*/", text)
			delete(m, name)
		}
	}
	return strings.NewReplacer(pairs...)
}

// aliased qualifies each expression of the column list cols with prefix
// (a column name, or the first argument of coalesce) and aliases it
// <alias>0, <alias>1, ….
func aliased(prefix, cols, alias string) string {
	parts := splitColumns(cols)
	for i, c := range parts {
		c = strings.TrimSpace(c)
		if inner, ok := strings.CutPrefix(c, "coalesce("); ok {
			c = "coalesce(" + prefix + inner
		} else {
			c = prefix + c
		}
		parts[i] = fmt.Sprintf("%s AS %s%d", c, alias, i)
	}
	return strings.Join(parts, ", ")
}

// selected lists <from><alias>0 … <from><alias>n-1.
func selected(from, alias string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s%s%d", from, alias, i)
	}
	return strings.Join(parts, ", ")
}

// splitColumns splits a column list at its top-level commas.
func splitColumns(cols string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range cols {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, cols[start:i])
				start = i + 1
			}
		}
	}
	return append(out, cols[start:])
}

// runColumns, stepColumns and waitColumns are the column lists the core's
// scanRun, scanStep and scanWait read.
const (
	runColumns = `id::text, workspace_id, env, coalesce(definition_id::text, ''), workflow_name,
	workflow_revision, coalesce(template_id, ''), status, claim_state, coalesce(runner_pool, ''),
	priority, coalesce(leased_by, ''), lease_until, lease_epoch, last_heartbeat, claim_attempts,
	attempt, max_attempts, available_at, recovery_mode, trigger_type, coalesce(parent_run_id::text, ''),
	coalesce(idempotency_key, ''), input_json, output_json, checkpoint_json, coalesce(phase, ''),
	coalesce(error, ''), dead_lettered, cancel_requested, created_at, started_at, completed_at,
	coalesce(duration_ms, 0), updated_at, attempt_started_at, error_json, coalesce(trace_id, ''), coalesce(trace_parent, '')`
	stepColumns = `run_id::text, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
	coalesce(duration_ms, 0), coalesce(error, ''), coalesce(updated_at, finished_at, started_at)`
	waitColumns = `id::text, run_id::text, workspace_id, attempt, scope_path, step_id, kind,
	coalesce(signal, ''), coalesce(correlation_key, ''), coalesce(token_hash, ''),
	coalesce(key_id, ''), wake_at, expires_at, status, payload_json::text, notify_json::text,
	notified_at, notify_tries, created_at, consumed_at, form_json::text`
)

// query returns the statement named name.
func query(name string) string {
	text, ok := Queries[name]
	if !ok {
		panic("pgstore: no query " + name)
	}
	return text
}

// dialect is storecore.Dialect (and StepBatcher) for PostgreSQL on a pgx
// pool.
type dialect struct {
	pool    *pgxpool.Pool
	schema  string
	channel string
}

var (
	_ storecore.Dialect     = (*dialect)(nil)
	_ storecore.StepBatcher = (*dialect)(nil)
)

func (d *dialect) Name() string               { return "postgres" }
func (d *dialect) Queries() map[string]string { return Queries }
func (d *dialect) SingleWriter() bool         { return false }
func (d *dialect) Reader() storecore.Conn     { return pool{d.pool} }
func (d *dialect) Close() error               { d.pool.Close(); return nil }

// Retryable: PostgreSQL broke a deadlock by aborting this transaction.
// Writes that lock two runs may meet one: a child's end locks the child,
// then its parent; a cancel locks the parent, then its children.
func (d *dialect) Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeDeadlock
}

// PostgreSQL error codes.
const (
	codeUniqueViolation = "23505"
	codeDeadlock        = "40P01"
)

// Begin opens a transaction. A lock timeout is set by the transaction's
// first statement (or queued first in a pipeline), not by a round trip of
// its own.
func (d *dialect) Begin(ctx context.Context, opts storecore.TxOptions) (storecore.Conn, error) {
	t, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	c := &tx{Tx: t}
	if opts.LockTimeout > 0 {
		c.lockTimeout = fmt.Sprintf("%dms", opts.LockTimeout.Milliseconds())
	}
	return c, nil
}

// setLockTimeout is the statement that sets a transaction's lock_timeout.
const setLockTimeout = "SELECT set_config('lock_timeout', $1, true)"

// Notify sends pg_notify on the store's channel for each pool (” = any):
// delivered when the transaction commits, never when it rolls back.
func (d *dialect) Notify(ctx context.Context, t storecore.Conn, pools []string) error {
	for _, pool := range pools {
		if _, err := t.Exec(ctx, "SELECT pg_notify($1, $2)", d.channel, pool); err != nil {
			return err
		}
	}
	return nil
}

// Lock takes the transaction advisory lock of key in this schema: it
// serialises the registration of waits and the delivery of signals that
// meet by correlation key alone (no run row to lock).
func (d *dialect) Lock(ctx context.Context, t storecore.Conn, key string) error {
	sum := sha256.Sum256([]byte(d.schema + "\x00" + key))
	_, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", int64(binary.BigEndian.Uint64(sum[:8])))
	return err
}

// Arg binds durations as whole microseconds ($n::bigint * interval '1
// microsecond' in queries.sql).
func (d *dialect) Arg(v any) any {
	if dur, ok := v.(time.Duration); ok {
		return dur.Microseconds()
	}
	return v
}

// TimeHolder reads a nullable timestamptz.
func (d *dialect) TimeHolder() (any, func() time.Time) {
	h := new(*time.Time)
	return h, func() time.Time {
		if *h == nil {
			return time.Time{}
		}
		return (*h).UTC()
	}
}

// TimePrecision: timestamptz keeps microseconds (pgx truncates a bound
// time to them).
func (d *dialect) TimePrecision() time.Duration { return time.Microsecond }

// Translate maps "no rows" and unique violations (ErrConflict).
func (d *dialect) Translate(err error) error { return translate(err) }

func translate(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return storecore.ErrNoRows
	case errors.As(err, &pe) && pe.Code == codeUniqueViolation:
		return fmt.Errorf("%w: %v", starflowtype.ErrConflict, err)
	case errors.As(err, &pe) && badValue[pe.Code] != "":
		// A caller's value PostgreSQL cannot store: the caller's mistake
		// (400 over HTTP), in a sentence of ours, not the server's.
		return starflowtype.Invalid(errors.New(badValue[pe.Code]))
	}
	return err
}

// badValue are the SQLSTATEs of values a caller sent that PostgreSQL
// refuses to store (SQLite stores them): text with a NUL byte or bytes
// that are not UTF-8, a JSON \u0000 escape, a number out of its column's
// range.
var badValue = map[string]string{
	"22021": "a text value holds a NUL character or bytes that are not UTF-8",
	"22P05": "a JSON value holds a \\u0000 escape or a character PostgreSQL cannot store",
	"22003": "a number is out of range for its field",
	"54000": "a value is too large to store",
}

// tx is one write transaction; lockTimeout, until sent, is the
// lock_timeout its first statement sets.
type tx struct {
	pgx.Tx
	lockTimeout string
}

// first sends the pending lock_timeout.
func (t *tx) first(ctx context.Context) error {
	if t.lockTimeout == "" {
		return nil
	}
	v := t.lockTimeout
	t.lockTimeout = ""
	if _, err := t.Tx.Exec(ctx, setLockTimeout, v); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	return nil
}

func (t *tx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if err := t.first(ctx); err != nil {
		return 0, err
	}
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) storecore.Row {
	if err := t.first(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (storecore.Rows, error) {
	if err := t.first(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

// errRow is a row whose statement was not sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// pool runs statements on the pool, outside any transaction.
type pool struct{ *pgxpool.Pool }

func (p pool) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := p.Pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (p pool) QueryRow(ctx context.Context, sql string, args ...any) storecore.Row {
	return p.Pool.QueryRow(ctx, sql, args...)
}

func (p pool) Query(ctx context.Context, sql string, args ...any) (storecore.Rows, error) {
	return p.Pool.Query(ctx, sql, args...)
}

func (pool) Commit(context.Context) error   { return nil }
func (pool) Rollback(context.Context) error { return nil }
