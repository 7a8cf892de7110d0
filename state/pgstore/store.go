package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Defaults of Config.
const (
	// IdleInTransactionTimeoutDefault is the default
	// Config.IdleInTransactionTimeout: below the 30 s lease TTL, so the
	// server ends the session (and releases the row locks) of a runner
	// that froze inside a transaction before its lease runs out.
	IdleInTransactionTimeoutDefault = 20 * time.Second
	// SweepLockTimeoutDefault is the default Config.SweepLockTimeout.
	SweepLockTimeoutDefault = storecore.SweepLockTimeoutDefault
	// ChannelPrefix starts the name of the LISTEN/NOTIFY channel; the
	// schema name follows it (see Store.Channel).
	ChannelPrefix = "starflow_work"
)

// maxIdentifier is PostgreSQL's identifier length limit (NAMEDATALEN - 1),
// which channel names obey too.
const maxIdentifier = 63

// Config configures Open.
type Config struct {
	// URL is the connection string (postgres://user@host:port/db?…, or
	// key=value pairs). Required. Pool settings in it (pool_max_conns, …)
	// apply.
	URL string
	// Schema isolates this store in one schema of the database: Migrate
	// creates it when missing, and every connection's search_path is set
	// to it, so the tables, goose's version table and the hooks' SQL all
	// live there. Default "": the connection's own search_path (usually
	// public). A name must pass CheckSchema (lower-case letters, digits,
	// underscores; at most 63 bytes); Open refuses another.
	Schema string
	// Hooks run inside every write transaction (see state.TxHook), with
	// dialect "postgres".
	Hooks []state.TxHook
	// IdleInTransactionTimeout is the idle_in_transaction_session_timeout
	// of every connection of the pool. Default
	// IdleInTransactionTimeoutDefault (20 s); keep it below the lease TTL.
	// Negative disables it (the server's setting applies).
	IdleInTransactionTimeout time.Duration
	// BlobThreshold is the size (bytes) above which a checkpoint's output
	// or context delta goes to workflow_blobs by sha256. Default
	// state.BlobThresholdDefault (256 KiB).
	BlobThreshold int
	// SweepLockTimeout is the lock_timeout of ExpireOldLeases's
	// transaction (SET LOCAL), a second guard beside SKIP LOCKED. Default
	// SweepLockTimeoutDefault (2 s).
	SweepLockTimeout time.Duration
	// MaxConns bounds the pool. Default: pgxpool's (the URL's
	// pool_max_conns, else the greater of 4 and the number of CPUs).
	MaxConns int32
	// Logger receives Listen's reconnects and Migrate's warnings (the
	// wake-token secrets migration 00008 removes). Default: discard.
	Logger *slog.Logger

	// Pipelines bounds the group commits of step writes in flight at once
	// (storecore.Config.Pipelines). Default 1: on a PostgreSQL that is
	// CPU-bound more only makes each batch smaller; a server whose commits
	// wait on a slow disk may gain from 2–4.
	Pipelines int

	// statementsOnly hides the dialect's StepBatcher, so the step writes
	// run statement by statement as on SQLite (the tests compare both).
	statementsOnly bool
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.IdleInTransactionTimeout == 0 {
		c.IdleInTransactionTimeout = IdleInTransactionTimeoutDefault
	}
	if c.SweepLockTimeout <= 0 {
		c.SweepLockTimeout = SweepLockTimeoutDefault
	}
	if c.BlobThreshold <= 0 {
		c.BlobThreshold = state.BlobThresholdDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	if c.URL == "" {
		return errors.New("pgstore: URL is required")
	}
	if c.Schema != "" {
		if err := CheckSchema(c.Schema); err != nil {
			return fmt.Errorf("pgstore: Schema: %w", err)
		}
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("pgstore: MaxConns must not be negative, got %d", c.MaxConns)
	}
	if c.Pipelines < 0 {
		return fmt.Errorf("pgstore: Pipelines must not be negative, got %d", c.Pipelines)
	}
	return nil
}

// schemaName is the form a schema name must have: a lower-case unquoted
// PostgreSQL identifier, so that it means the same schema quoted or not
// (psql's `SET search_path = name` folds case).
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// CheckSchema reports whether name can be Config.Schema: 1 to 63 bytes of
// lower-case ASCII letters, digits and underscores, not starting with a
// digit, and not starting with "pg_" (reserved for system schemas). The
// error says what is wrong.
func CheckSchema(name string) error {
	switch {
	case name == "":
		return errors.New("schema name is empty")
	case len(name) > maxIdentifier:
		return fmt.Errorf("schema name %.20q… is %d bytes long; PostgreSQL names are at most %d", name, len(name), maxIdentifier)
	case !schemaName.MatchString(name):
		return fmt.Errorf("schema name %q: want lower-case letters, digits and underscores, not starting with a digit (e.g. starflow_prod)", name)
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("schema name %q: names starting with pg_ are reserved for PostgreSQL's system schemas", name)
	}
	return nil
}

// Store is the PostgreSQL adapter: the store core (internal/storecore)
// over the PostgreSQL dialect. It is safe for concurrent use.
type Store struct {
	*storecore.Store
	cfg     Config
	pool    *pgxpool.Pool
	channel string
}

var _ state.Adapter = (*Store)(nil)

// Open creates the connection pool and checks that the server answers. It
// does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	params := pc.ConnConfig.RuntimeParams
	if cfg.Schema != "" {
		// Sent in the startup packet: no round trip per connection, and
		// no connection ever runs a query before it is set.
		params["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	if cfg.IdleInTransactionTimeout > 0 {
		params["idle_in_transaction_session_timeout"] = fmt.Sprint(cfg.IdleInTransactionTimeout.Milliseconds())
	}
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "starflow"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	d := &dialect{pool: pool, schema: cfg.Schema, channel: channelName(cfg.Schema)}
	var sd storecore.Dialect = d
	if cfg.statementsOnly {
		sd = struct{ storecore.Dialect }{d}
	}
	core := storecore.New(sd, storecore.Config{Name: "pgstore", Hooks: cfg.Hooks, BlobThreshold: cfg.BlobThreshold,
		SweepLockTimeout: cfg.SweepLockTimeout, Pipelines: cfg.Pipelines, Logger: cfg.Logger})
	return &Store{Store: core, cfg: cfg, pool: pool, channel: d.channel}, nil
}

// channelName is the LISTEN/NOTIFY channel of schema: ChannelPrefix, then
// "_" and the schema; a name past the identifier limit ends with a hash of
// the schema instead, so distinct schemas keep distinct channels.
func channelName(schema string) string {
	if schema == "" {
		return ChannelPrefix
	}
	name := ChannelPrefix + "_" + schema
	if len(name) <= maxIdentifier {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	tail := "_" + hex.EncodeToString(sum[:8])
	return name[:maxIdentifier-len(tail)] + tail
}

// Capabilities implements state.Adapter.
func (s *Store) Capabilities() state.Capabilities {
	return state.Capabilities{Durable: true, Dialect: "postgres"}
}

// Pool returns the connection pool. Its connections have the store's
// search_path, so a transaction begun on it can be passed to EnqueueTx;
// they also carry idle_in_transaction_session_timeout
// (Config.IdleInTransactionTimeout), so a transaction left idle longer than
// that is ended by the server.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Channel returns the LISTEN/NOTIFY channel the store notifies when work
// becomes claimable ("starflow_work" or "starflow_work_<schema>").
func (s *Store) Channel() string { return s.channel }

// Schema returns Config.Schema ("" when the connection's search_path
// applies).
func (s *Store) Schema() string { return s.cfg.Schema }

// Migrate implements state.Adapter: it creates the schema when
// Config.Schema names one, then applies every pending numbered migration
// with goose. Concurrent Migrate calls (from several processes) are
// serialised by an advisory lock per schema.
func (s *Store) Migrate(ctx context.Context) error {
	if s.cfg.Schema != "" {
		if err := s.createSchema(ctx); err != nil {
			return fmt.Errorf("pgstore: create schema %s: %w", s.cfg.Schema, err)
		}
	}
	fsys, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(s.lockID()), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	if err := s.warnStoredWakeKeys(ctx); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}

// warnStoredWakeKeys logs, before migration 00008 drops them, the ids of
// the wake-token secrets a database older than it holds: the tokens they
// signed verify afterwards only if STARFLOW_WAKE_KEYS holds them (a
// PostgreSQL store has no file to move them to; see docs/operations.md,
// "Upgrading to migration 00008").
func (s *Store) warnStoredWakeKeys(ctx context.Context) error {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'wake_keys' AND column_name = 'secret'`).Scan(&n); err != nil {
		return fmt.Errorf("pgstore: migrate: look for stored wake-key secrets: %w", err)
	}
	if n == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM wake_keys ORDER BY created_at DESC, seq DESC`)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: look for stored wake-key secrets: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgstore: migrate: look for stored wake-key secrets: %w", err)
	}
	if len(ids) > 0 {
		s.cfg.Logger.Warn("migration 00008 removes the wake-token signing secrets stored in wake_keys (the database keeps only key ids and fingerprints): "+
			"tokens they signed verify afterwards only if STARFLOW_WAKE_KEYS holds them (see docs/operations.md, \"Upgrading to migration 00008\")",
			"key_ids", ids)
	}
	return nil
}

// createSchema creates Config.Schema unless it exists. CREATE SCHEMA IF NOT
// EXISTS alone can still fail with a unique violation when two sessions
// race, so it runs under a transaction-scoped advisory lock.
func (s *Store) createSchema(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.lockID()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.cfg.Schema}.Sanitize())
		return err
	})
}

// lockID is the advisory lock key of this store's schema: migrations of
// different schemas do not wait for each other.
func (s *Store) lockID() int64 {
	sum := sha256.Sum256([]byte("starflow pgstore migrate\x00" + s.cfg.Schema))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// EnqueueTx is EnqueueRun inside the caller's transaction tx, so that the
// run commits or rolls back with the caller's own writes. It runs in a
// savepoint of tx: when it fails, tx is left as it was and usable. The
// hooks run and the notification is sent as in EnqueueRun; PostgreSQL
// delivers the notification when tx commits. The returned run is as of
// the end of the savepoint, not yet committed.
//
// tx must use this store's schema: begin it on Pool(), or on a connection
// whose search_path names Config.Schema. A duplicate IdempotencyKey held by
// a concurrent uncommitted transaction makes EnqueueTx wait for that
// transaction.
func (s *Store) EnqueueTx(ctx context.Context, t pgx.Tx, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	sp, err := t.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: savepoint: %w", p.WorkflowName, translate(err))
	}
	run, err := s.EnqueueIn(ctx, &tx{sp: sp, channel: s.channel}, p)
	if err != nil {
		_ = sp.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: release savepoint: %w", p.WorkflowName, translate(err))
	}
	return run, nil
}

// canonicalID is storecore.CanonicalID.
func canonicalID(id string) (string, bool) { return storecore.CanonicalID(id) }

// OutboxStatsExact is the number of unapplied rows OutboxStats reads: up
// to it, the counts are exact; beyond, estimated (OutboxStats.Estimated).
const OutboxStatsExact = storecore.OutboxStatsExact
