package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/starflow/starflow/internal/sqlq"
	"github.com/starflow/starflow/state"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

//go:embed queries.sql
var queriesSQL string

var queries = sqlq.MustParse(queriesSQL)

// runColumns is the column list scanned by scanRun, substituted for the
// /*run_columns*/ marker in queries.sql.
const runColumns = `id, workspace_id, env, coalesce(definition_id, ''), workflow_name,
	workflow_revision, coalesce(template_id, ''), status, claim_state, coalesce(runner_pool, ''),
	priority, coalesce(leased_by, ''), lease_until, lease_epoch, last_heartbeat, claim_attempts,
	attempt, max_attempts, available_at, recovery_mode, trigger_type, coalesce(parent_run_id, ''),
	coalesce(idempotency_key, ''), input_json, output_json, checkpoint_json, coalesce(phase, ''),
	coalesce(error, ''), dead_lettered, cancel_requested, created_at, started_at, completed_at,
	coalesce(duration_ms, 0), updated_at, attempt_started_at`

func q(name string) string {
	s, ok := queries[name]
	if !ok {
		panic("sqlitestore: no query " + name)
	}
	s = strings.Replace(s, "/*run_columns*/", runColumns, 1)
	s = strings.Replace(s, "/*step_columns*/", stepColumns, 1)
	return strings.Replace(s, "/*wait_columns*/", waitColumns, 1)
}

// stepColumns is the column list scanned by scanStep, substituted for the
// /*step_columns*/ marker in queries.sql (the step writes' RETURNING).
const stepColumns = `run_id, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
	coalesce(duration_ms, 0), coalesce(error, ''), coalesce(updated_at, finished_at, started_at)`

// waitColumns is the column list scanned by scanWait, substituted for the
// /*wait_columns*/ marker in queries.sql.
const waitColumns = `id, run_id, workspace_id, attempt, scope_path, step_id, kind,
	coalesce(signal, ''), coalesce(correlation_key, ''), coalesce(token_hash, ''),
	coalesce(key_id, ''), wake_at, expires_at, status, payload_json, notify_json,
	notified_at, notify_tries, created_at, consumed_at`

// Synchronous values for Config.Synchronous.
const (
	SynchronousFull   = "FULL"
	SynchronousNormal = "NORMAL"
)

// Config configures Open.
type Config struct {
	// Path is the database file. Required. Parent directories must exist.
	Path string
	// Synchronous is the PRAGMA synchronous level: SynchronousFull
	// (default: a commit is on disk before it returns) or SynchronousNormal
	// (faster in WAL mode; a commit survives a process crash but the last
	// ones may be lost on power loss).
	Synchronous string
	// BusyTimeout is how long a write waits for another process's write
	// lock. Default 10 s.
	BusyTimeout time.Duration
	// ReadConns is the size of the reader pool. Default 4.
	ReadConns int
	// Hooks run inside every write transaction (see state.TxHook).
	Hooks []state.TxHook
	// BlobThreshold is the size (bytes) above which a checkpoint's output
	// or context delta goes to workflow_blobs by sha256. Default
	// state.BlobThresholdDefault (256 KiB).
	BlobThreshold int
	// Logger receives the store's warnings: a database file other users
	// could read, made owner-only at Open (see FileMode), and the wake-key
	// secrets Migrate moves out of a database older than migration 00008.
	// Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = SynchronousFull
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 10 * time.Second
	}
	if c.ReadConns == 0 {
		c.ReadConns = 4
	}
	if c.BlobThreshold <= 0 {
		c.BlobThreshold = state.BlobThresholdDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	if c.Path == "" {
		return errors.New("sqlitestore: Path is required")
	}
	if c.Synchronous != SynchronousFull && c.Synchronous != SynchronousNormal {
		return fmt.Errorf("sqlitestore: Synchronous must be FULL or NORMAL, not %q", c.Synchronous)
	}
	return nil
}

// Store is the SQLite adapter. It is safe for concurrent use.
type Store struct {
	cfg   Config
	write *sql.DB // exactly one connection: the single writer
	read  *sql.DB
	// stmts are the queries of queries.sql prepared on the writer,
	// lazily at the first write (the tables must exist by then).
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

var _ state.Adapter = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path. It does not
// migrate; call Migrate. A new database file is created with FileMode
// (0600), and existing files of the database that other users may access
// are made owner-only, with a warning on cfg.Logger naming each.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := secureFiles(cfg.Path, cfg.Logger); err != nil {
		return nil, err
	}
	dsn := func(txlock string, readOnly bool) string {
		v := url.Values{}
		v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
		v.Add("_pragma", "journal_mode(WAL)")
		v.Add("_pragma", "synchronous("+cfg.Synchronous+")")
		v.Add("_pragma", "foreign_keys(1)")
		if readOnly {
			v.Add("_pragma", "query_only(1)")
		}
		v.Set("_txlock", txlock)
		return "file:" + cfg.Path + "?" + v.Encode()
	}
	w, err := sql.Open("sqlite", dsn("immediate", false))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := ping(w, cfg.BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
	}
	r, err := sql.Open("sqlite", dsn("deferred", true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	return &Store{cfg: cfg, write: w, read: r}, nil
}

// ping opens the first connection. Switching a new file to WAL takes a
// lock for which SQLite does not wait (SQLITE_BUSY at once when another
// process opens the same new file at that moment), so a busy ping is tried
// again until busyTimeout.
func ping(db *sql.DB, busyTimeout time.Duration) error {
	deadline := time.Now().Add(busyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.Ping()
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// Capabilities implements state.Adapter.
func (s *Store) Capabilities() state.Capabilities {
	return state.Capabilities{Durable: true, Dialect: "sqlite", WakeKeyFile: s.cfg.Path + WakeKeyFileSuffix}
}

// Migrate implements state.Adapter: it applies every pending numbered
// migration with goose. The wake-token secrets a database older than
// migration 00008 holds are first added to the key file
// (Capabilities().WakeKeyFile), so the tokens they signed keep verifying,
// and the migration that drops them then runs with secure_delete on (the
// freed pages are zeroed) and is followed by a WAL checkpoint.
func (s *Store) Migrate(ctx context.Context) error {
	moved, err := s.moveWakeKeySecrets(ctx)
	if err != nil {
		return err
	}
	if moved {
		if _, err := s.write.ExecContext(ctx, "PRAGMA secure_delete = ON"); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %w", err)
		}
		defer func() {
			_, _ = s.write.ExecContext(context.WithoutCancel(ctx), "PRAGMA secure_delete = OFF")
		}()
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if moved {
		// The old table's pages are zeroed in the WAL; copy them into the
		// database file and empty the WAL.
		if _, err := s.write.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return fmt.Errorf("sqlitestore: migrate: checkpoint after removing wake-key secrets: %w", err)
		}
	}
	return nil
}

// migrate applies the pending migrations.
func (s *Store) migrate(ctx context.Context) error {
	fsys, err := subFS()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.write, fsys)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrations: %w", err)
	}
	// Two processes opening a new file at once both try migration 1; each
	// migration is one transaction, so the loser's fails and rolls back
	// while the winner's commits. Trying again then finds it applied.
	for try := 1; ; try++ {
		_, err = p.Up(ctx)
		if err == nil {
			break
		}
		if try == migrateTries || ctx.Err() != nil {
			return fmt.Errorf("sqlitestore: migrate: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sqlitestore: migrate: %w", ctx.Err())
		case <-time.After(time.Duration(try) * 50 * time.Millisecond):
		}
	}
	s.closeStmts() // the schema may have changed: prepare again
	return nil
}

// migrateTries bounds Migrate's retries when another process migrates the
// same file at the same time.
const migrateTries = 5

// prepared returns the prepared statements, preparing them on first use.
func (s *Store) prepared(ctx context.Context) (map[string]*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts != nil {
		return s.stmts, nil
	}
	stmts := make(map[string]*sql.Stmt, len(queries))
	for name := range queries {
		st, err := s.write.PrepareContext(ctx, q(name))
		if err != nil {
			for _, st := range stmts {
				st.Close()
			}
			return nil, fmt.Errorf("prepare %s (is the database migrated? run starflow migrate): %w", name, err)
		}
		stmts[name] = st
	}
	s.stmts = stmts
	return stmts, nil
}

func (s *Store) closeStmts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
}

// Close implements state.Adapter.
func (s *Store) Close() error {
	s.closeStmts()
	return errors.Join(s.read.Close(), s.write.Close())
}

// DB returns the writer handle, for tests and benchmarks that need raw SQL
// on the same connection settings.
func (s *Store) DB() *sql.DB { return s.write }
