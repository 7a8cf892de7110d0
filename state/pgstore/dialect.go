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
	coalesce(duration_ms, 0), updated_at, attempt_started_at, error_json, coalesce(trace_id, ''), coalesce(trace_parent, ''), depth`
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

// Begin opens a transaction on a connection of the pool. Nothing is sent
// yet: BEGIN, and the lock timeout and planner setting of opts, go to the server in
// one pipeline with the transaction's first statement (tx.send), so a
// transaction costs one round trip fewer than pgx's Begin would.
func (d *dialect) Begin(ctx context.Context, opts storecore.TxOptions) (storecore.Conn, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	c := &tx{conn: conn, channel: d.channel, byKey: opts.ByKey}
	if opts.LockTimeout > 0 {
		c.lockTimeout = fmt.Sprintf("%dms", opts.LockTimeout.Milliseconds())
	}
	return c, nil
}

// setLockTimeout is the statement that sets a transaction's lock_timeout.
const setLockTimeout = "SELECT set_config('lock_timeout', $1, true)"

// Notify sends pg_notify on the store's channel for each pool (” = any):
// delivered when the transaction commits, never when it rolls back. In a
// transaction of the store's own the notifications wait for Commit and go
// in COMMIT's pipeline.
func (d *dialect) Notify(ctx context.Context, t storecore.Conn, pools []string) error {
	c := t.(*tx)
	if c.conn != nil {
		c.notify = append(c.notify, pools...)
		return nil
	}
	for _, pool := range pools {
		if _, err := t.Exec(ctx, notifyStatement, d.channel, pool); err != nil {
			return err
		}
	}
	return nil
}

// notifyStatement sends a notification ($1 channel, $2 payload).
const notifyStatement = "SELECT pg_notify($1, $2)"

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

// tx is one write transaction: its own, on conn (Begin), or a savepoint
// of a caller's transaction, sp (Store.EnqueueTx). Until begun, BEGIN has
// not been sent; until lockTimeout is "", the lock timeout has not been
// set: both go in the pipeline of the next statement. notify are the
// pools Commit notifies (Notify): a rollback to a savepoint of the core's
// (storecore's savepoint mode, used only by single-writer dialects) would
// not take back a notification queued before it.
type tx struct {
	conn        *pgxpool.Conn // nil once released, and for a savepoint
	sp          pgx.Tx
	begun       bool
	byKey       bool // TxOptions.ByKey: SET LOCAL enable_seqscan = off after BEGIN
	lockTimeout string
	channel     string
	notify      []string
}

// on is what the transaction's statements run on.
func (t *tx) on() interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
} {
	if t.sp != nil {
		return t.sp
	}
	return t.conn
}

// ended reports whether Commit or Rollback returned the connection.
func (t *tx) ended() bool { return t.conn == nil && t.sp == nil }

// ready reports whether nothing waits to go before the next statement.
func (t *tx) ready() bool { return (t.begun || t.sp != nil) && t.lockTimeout == "" }

// prologue is a batch of what must go before the next statement (BEGIN,
// the lock timeout), taken: the caller sends it.
func (t *tx) prologue() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun && t.sp == nil {
		b.Queue("BEGIN")
		if t.byKey {
			b.Queue("SET LOCAL enable_seqscan = off")
		}
		t.begun = true
	}
	if t.lockTimeout != "" {
		b.Queue(setLockTimeout, t.lockTimeout)
		t.lockTimeout = ""
	}
	return b
}

// send sends the prologue and one statement in one pipeline and reads the
// prologue's results: the statement's are next in the returned batch,
// which the caller reads and closes.
func (t *tx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := t.prologue()
	n := b.Len()
	b.Queue(sql, args...)
	br := t.on().SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

// SendBatch sends b's statements after the prologue, in one pipeline.
func (t *tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p := t.prologue()
	p.QueuedQueries = append(p.QueuedQueries, b.QueuedQueries...)
	return t.on().SendBatch(ctx, p)
}

func (t *tx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if t.ended() {
		return 0, pgx.ErrTxClosed
	}
	if t.ready() {
		tag, err := t.on().Exec(ctx, sql, args...)
		return tag.RowsAffected(), err
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected(), err
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) storecore.Row {
	if t.ended() {
		return errRow{pgx.ErrTxClosed}
	}
	if t.ready() {
		return t.on().QueryRow(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return batchRow{br.QueryRow(), br}
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (storecore.Rows, error) {
	if t.ended() {
		return nil, pgx.ErrTxClosed
	}
	if t.ready() {
		return t.on().Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// Commit sends the notifications and COMMIT in one pipeline (nothing when
// no statement was sent) and returns the connection to the pool. A
// transaction that failed on the server and is committed returns
// pgx.ErrTxCommitRollback, as pgx's Commit does.
func (t *tx) Commit(ctx context.Context) error {
	if t.sp != nil {
		return t.sp.Commit(ctx)
	}
	if t.conn == nil {
		return pgx.ErrTxClosed
	}
	defer t.release()
	if !t.begun {
		return nil
	}
	b := t.prologue()
	for _, pool := range t.notify {
		b.Queue(notifyStatement, t.channel, pool)
	}
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	err := t.conn.SendBatch(ctx, b).Close()
	if err != nil && t.conn.Conn().PgConn().TxStatus() != 'I' {
		// A notification failed before COMMIT: end the transaction, or
		// leave the connection to the pool to close.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = t.conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	return err
}

// Rollback rolls back what was sent and returns the connection to the
// pool (which closes it when the rollback did not leave it idle).
func (t *tx) Rollback(ctx context.Context) error {
	if t.sp != nil {
		return t.sp.Rollback(ctx)
	}
	if t.conn == nil {
		return pgx.ErrTxClosed
	}
	defer t.release()
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

func (t *tx) release() {
	t.conn.Release()
	t.conn = nil
}

// batchRow is the row of a statement sent after a prologue: scanning it
// closes its batch.
type batchRow struct {
	pgx.Row
	br pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a statement sent after a prologue: closing
// them closes their batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
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
