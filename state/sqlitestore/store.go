package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/state"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

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

// Memory is the Config.Path of an in-memory database: nothing survives
// Close (state/nullstore). It has one connection, for writes and reads.
const Memory = ":memory:"

// Store is the SQLite adapter: the store core (internal/storecore) over
// the SQLite dialect. It is safe for concurrent use.
type Store struct {
	*storecore.Store
	cfg   Config
	d     *dialect
	write *sql.DB // exactly one connection: the single writer
	read  *sql.DB
}

var _ state.Adapter = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path, or an empty
// in-memory database when cfg.Path is Memory. It does not migrate; call
// Migrate. A new database file is created with FileMode (0600), and
// existing files of the database that other users may access are made
// owner-only, with a warning on cfg.Logger naming each.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	memory := cfg.Path == Memory
	if !memory {
		if err := secureFiles(cfg.Path, cfg.Logger); err != nil {
			return nil, err
		}
	}
	dsn := func(txlock string, readOnly bool) string {
		v := url.Values{}
		v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
		if !memory {
			v.Add("_pragma", "journal_mode(WAL)")
		}
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
	w.SetConnMaxIdleTime(0)
	if err := ping(w, cfg.BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
	}
	r := w
	if !memory {
		if r, err = sql.Open("sqlite", dsn("deferred", true)); err != nil {
			w.Close()
			return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
		}
		r.SetMaxOpenConns(cfg.ReadConns)
	}
	d := &dialect{write: w, read: r}
	core := storecore.New(d, storecore.Config{Name: "sqlitestore", Hooks: cfg.Hooks, BlobThreshold: cfg.BlobThreshold, Logger: cfg.Logger})
	return &Store{Store: core, cfg: cfg, d: d, write: w, read: r}, nil
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

// Capabilities implements state.Adapter. An in-memory database is not
// durable and has no key file.
func (s *Store) Capabilities() state.Capabilities {
	if s.cfg.Path == Memory {
		return state.Capabilities{Dialect: "sqlite"}
	}
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
	s.d.closeStmts() // the schema may have changed: prepare again
	return nil
}

// migrateTries bounds Migrate's retries when another process migrates the
// same file at the same time.
const migrateTries = 5

// DB returns the writer handle, for tests and benchmarks that need raw SQL
// on the same connection settings.
func (s *Store) DB() *sql.DB { return s.write }
