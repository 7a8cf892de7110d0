package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/starflow/starflow/internal/sqlq"
	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
)

//go:embed queries.sql
var queriesSQL string

// Queries holds every statement of queries.sql by name, the column lists
// of the core's scans and the shared parts (blocks named _*, written
// /*_name*/ where they go) substituted and now() turned into the database
// clock.
var Queries = func() map[string]string {
	m := sqlq.MustParseWith(queriesSQL, map[string]string{
		"run_columns": `id, workspace_id, env, coalesce(definition_id, ''), workflow_name,
	workflow_revision, coalesce(template_id, ''), status, claim_state, coalesce(runner_pool, ''),
	priority, coalesce(leased_by, ''), lease_until, lease_epoch, last_heartbeat, claim_attempts,
	attempt, max_attempts, available_at, recovery_mode, trigger_type, coalesce(parent_run_id, ''),
	coalesce(idempotency_key, ''), input_json, output_json, checkpoint_json, coalesce(phase, ''),
	coalesce(error, ''), dead_lettered, cancel_requested, created_at, started_at, completed_at,
	coalesce(duration_ms, 0), updated_at, attempt_started_at, error_json, coalesce(trace_id, ''), coalesce(trace_parent, ''), depth`,
		"step_columns": `run_id, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
	coalesce(duration_ms, 0), coalesce(error, ''), coalesce(updated_at, finished_at, started_at)`,
		"wait_columns": `id, run_id, workspace_id, attempt, scope_path, step_id, kind,
	coalesce(signal, ''), coalesce(correlation_key, ''), coalesce(token_hash, ''),
	coalesce(key_id, ''), wake_at, expires_at, status, payload_json, notify_json,
	notified_at, notify_tries, created_at, consumed_at, form_json`,
	})
	var pairs []string
	for name, text := range m {
		if strings.HasPrefix(name, "_") {
			pairs = append(pairs, "/*"+name+"*/", text)
			delete(m, name)
		}
	}
	parts := strings.NewReplacer(pairs...)
	for name, text := range m {
		text = parts.Replace(text)
		m[name] = nowCall.ReplaceAllStringFunc(text, func(call string) string {
			if mod := nowCall.FindStringSubmatch(call)[1]; mod != "" {
				return "strftime('%Y-%m-%dT%H:%M:%fZ','now', " + mod + ")"
			}
			return sqliteNow
		})
	}
	return m
}()

// nowCall matches now() and now(?N) in queries.sql.
var nowCall = regexp.MustCompile(`\bnow\((\?\d+)?\)`)

// timeLayout is how every timestamp is stored: RFC 3339 UTC with
// milliseconds, the text strftime('%Y-%m-%dT%H:%M:%fZ') produces.
const timeLayout = "2006-01-02T15:04:05.000Z"

// sqliteNow is the database clock in SQL.
const sqliteNow = `strftime('%Y-%m-%dT%H:%M:%fZ','now')`

// dialect is storecore.Dialect for SQLite: one writer connection (the
// single writer; the store's statements prepared on it) and a pool of
// query-only readers (the writer itself for an in-memory database).
type dialect struct {
	write, read *sql.DB
	mu          sync.Mutex
	stmts       map[string]*sql.Stmt // by text, prepared on the writer lazily
	reads       sync.Map             // text → *sql.Stmt prepared on the readers
}

var _ storecore.Dialect = (*dialect)(nil)

func (d *dialect) Name() string                                       { return "sqlite" }
func (d *dialect) Queries() map[string]string                         { return Queries }
func (d *dialect) SingleWriter() bool                                 { return true }
func (d *dialect) Retryable(error) bool                               { return false }
func (d *dialect) Reader() storecore.Conn                             { return pool{d} }
func (d *dialect) Lock(context.Context, storecore.Conn, string) error { return nil }

// Notify does nothing: the engine wakes its own runners when it enqueues,
// and other processes poll.
func (d *dialect) Notify(context.Context, storecore.Conn, []string) error { return nil }

func (d *dialect) Begin(ctx context.Context, _ storecore.TxOptions) (storecore.Conn, error) {
	stmts, err := d.prepared(ctx)
	if err != nil {
		return nil, err
	}
	t, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &tx{stmts: stmts, tx: t}, nil
}

func (d *dialect) Close() error {
	d.closeStmts()
	if d.read == d.write {
		return d.write.Close()
	}
	return errors.Join(d.read.Close(), d.write.Close())
}

// Arg converts durations to strftime modifiers and lists to JSON arrays.
func (d *dialect) Arg(v any) any {
	switch v := v.(type) {
	case time.Duration:
		return sqliteOffset(v)
	case time.Time:
		return v.Format(timeLayout)
	case []string:
		return jsonArray(v)
	case []int64:
		return jsonArray(v)
	case []float64:
		return jsonArray(v)
	}
	return v
}

// TimeHolder reads the text a time is stored as.
func (d *dialect) TimeHolder() (any, func() time.Time) {
	var s sql.NullString
	return &s, func() time.Time {
		t, err := time.Parse(time.RFC3339Nano, s.String)
		if !s.Valid || err != nil {
			return time.Time{}
		}
		return t.UTC()
	}
}

// TimePrecision: times are stored and bound as text with milliseconds
// (timeLayout truncates a bound time to them).
func (d *dialect) TimePrecision() time.Duration { return time.Millisecond }

// Translate maps "no rows" and constraint violations (ErrConflict).
func (d *dialect) Translate(err error) error {
	var se *sqlite.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return storecore.ErrNoRows
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT:
		return fmt.Errorf("%w: %v", starflowtype.ErrConflict, err)
	}
	return err
}

// prepared returns the statements prepared on the writer, preparing them
// on first use (the tables must exist by then).
func (d *dialect) prepared(ctx context.Context) (map[string]*sql.Stmt, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stmts != nil {
		return d.stmts, nil
	}
	stmts := make(map[string]*sql.Stmt, len(Queries)+3)
	texts := maps.Clone(Queries)
	for _, sp := range []string{storecore.SavepointSQL, storecore.ReleaseSQL, storecore.RollbackToSQL} {
		texts[sp] = sp // the group committer's, once per write of a batch
	}
	for name, text := range texts {
		st, err := d.write.PrepareContext(ctx, text)
		if err != nil {
			for _, st := range stmts {
				st.Close()
			}
			return nil, fmt.Errorf("prepare %s (is the database migrated? run starflow migrate): %w", name, err)
		}
		stmts[text] = st
	}
	d.stmts = stmts
	return stmts, nil
}

func (d *dialect) closeStmts() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.stmts {
		st.Close()
	}
	d.stmts = nil
	d.reads.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		d.reads.Delete(k)
		return true
	})
}

// tx is one write transaction on the writer connection: the store's
// queries run as the statements prepared on it (the set of its Begin:
// Migrate may prepare a new one meanwhile), other text as given.
type tx struct {
	stmts map[string]*sql.Stmt
	tx    *sql.Tx
}

func (t *tx) stmt(ctx context.Context, text string) *sql.Stmt {
	if st, ok := t.stmts[text]; ok {
		return t.tx.StmtContext(ctx, st)
	}
	return nil
}

func (t *tx) Exec(ctx context.Context, text string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := t.stmt(ctx, text); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = t.tx.ExecContext(ctx, text, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *tx) QueryRow(ctx context.Context, text string, args ...any) storecore.Row {
	return t.stmt(ctx, text).QueryRowContext(ctx, args...)
}

func (t *tx) Query(ctx context.Context, text string, args ...any) (storecore.Rows, error) {
	rs, err := t.stmt(ctx, text).QueryContext(ctx, args...)
	return rows{rs}, err
}

func (t *tx) Commit(context.Context) error   { return t.tx.Commit() }
func (t *tx) Rollback(context.Context) error { return t.tx.Rollback() }

// pool runs queries on the readers outside any transaction, each
// prepared once (database/sql prepares it on each reader connection as
// it is first used there).
type pool struct{ d *dialect }

func (p pool) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	if st, ok := p.d.reads.Load(text); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := p.d.read.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if old, loaded := p.d.reads.LoadOrStore(text, st); loaded {
		st.Close()
		return old.(*sql.Stmt), nil
	}
	return st, nil
}

func (p pool) Exec(ctx context.Context, text string, args ...any) (int64, error) {
	res, err := p.d.read.ExecContext(ctx, text, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (p pool) QueryRow(ctx context.Context, text string, args ...any) storecore.Row {
	st, err := p.stmt(ctx, text)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

func (p pool) Query(ctx context.Context, text string, args ...any) (storecore.Rows, error) {
	st, err := p.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	rs, err := st.QueryContext(ctx, args...)
	return rows{rs}, err
}

func (pool) Commit(context.Context) error   { return nil }
func (pool) Rollback(context.Context) error { return nil }

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// rows adapts *sql.Rows (whose Close returns an error) to storecore.Rows.
type rows struct{ *sql.Rows }

func (r rows) Close() { _ = r.Rows.Close() }

func jsonArray[T any](v []T) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sqliteOffset renders d as a strftime modifier: "+1.500 seconds".
func sqliteOffset(d time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", d.Seconds())
}

// translate is the dialect's Translate, for the store's own statements
// (leader election, migrations).
func translate(err error) error { return (*dialect)(nil).Translate(err) }
