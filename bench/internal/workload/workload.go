package workload

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // database/sql driver "sqlite" (pure Go)
)

// StepsPerRun is the workflow's length: every system runs workflows of
// this many no-op durable steps.
const StepsPerRun = 10

// Stores.
const (
	StorePG     = "postgres"
	StoreSQLite = "sqlite"
)

// SQLite synchronous levels.
const (
	SyncFull   = "FULL"
	SyncNormal = "NORMAL"
)

// StepName is the name of step i (0-based) in every system's workflow.
func StepName(i int) string { return fmt.Sprintf("s%02d", i) }

// RunConfig is one measurement: Runs workflows through Concurrency
// producers and Concurrency run slots on one store.
type RunConfig struct {
	Concurrency int
	Runs        int
	Store       string // StorePG or StoreSQLite
	Sync        string // SQLite: SyncFull or SyncNormal; PostgreSQL: ""
	PGURL       string // the database every PostgreSQL system uses (a schema each)
	PGConns     int    // connection pool size per system on PostgreSQL; 0 = the system's default
	Dir         string // a fresh directory for this measurement's SQLite files
	// RiverFetchCooldown is River's Config.FetchCooldown; 0 = River's
	// default (100 ms between fetches, which bounds one worker to about
	// 7–10 jobs/s).
	RiverFetchCooldown time.Duration
}

// Result is one measurement's outcome.
type Result struct {
	// Elapsed is from the first enqueue to the last run's end.
	Elapsed time.Duration
	// Steps is the number of durable steps the runs completed.
	Steps int
	// Checked says what the store held afterwards (the durability check).
	Checked string
}

// StepsPerSec is the measurement's throughput.
func (r Result) StepsPerSec() float64 { return float64(r.Steps) / r.Elapsed.Seconds() }

// DiscardLogger drops every record: the systems' logs would cost time
// and clutter the output.
var DiscardLogger = slog.New(slog.DiscardHandler)

// NewName returns prefix followed by 8 random hex characters: a schema or
// identifier of one measurement.
func NewName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Produce calls enqueue(ctx, i) for every i in [0, runs) from c
// goroutines (producer p takes i ≡ p mod c), each enqueuing its share back
// to back. It returns the first error; after it, no producer starts
// another enqueue (and ctx, as passed to enqueue, is cancelled).
func Produce(ctx context.Context, c, runs int, enqueue func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for p := 0; p < c; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < runs && ctx.Err() == nil; i += c {
				if err := enqueue(ctx, i); err != nil {
					cancel(fmt.Errorf("producer %d, run %d: %w", p, i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// WithPoolSize returns the PostgreSQL URL with pool_max_conns set when
// conns > 0 (pgxpool reads it from the URL).
func WithPoolSize(pgURL string, conns int) (string, error) {
	if conns <= 0 {
		return pgURL, nil
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", fmt.Sprint(conns))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// PGExec runs statements (simple protocol: several may be given in one
// string) on a connection of its own.
func PGExec(ctx context.Context, pgURL, stmts string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmts, pgx.QueryExecModeSimpleProtocol)
	return err
}

// PGCount runs a query returning one integer.
func PGCount(ctx context.Context, pgURL, query string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	err = conn.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// DropSchema drops a measurement's schema (and everything in it). It runs
// even when ctx is done.
func DropSchema(ctx context.Context, pgURL, schema string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return PGExec(ctx, pgURL, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// SQLiteCount runs a query returning one integer on a SQLite file, on a
// connection of its own.
func SQLiteCount(ctx context.Context, path, query string, args ...any) (int64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

// SQLiteDSN is a modernc.org/sqlite DSN for path in WAL mode at the given
// synchronous level, with the busy timeout the peers use (5 s).
func SQLiteDSN(path, sync string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
}

// SQLitePragmaSynchronous opens dsn (a modernc.org/sqlite DSN) and returns
// the synchronous level a connection of it has (0 OFF, 1 NORMAL, 2 FULL,
// 3 EXTRA): how the harness checks the level a DSN form gives.
func SQLitePragmaSynchronous(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var level int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
		return "", err
	}
	return [...]string{"OFF", "NORMAL", "FULL", "EXTRA"}[level&3], nil
}

// CheckCount returns an error unless got == want.
func CheckCount(what string, got, want int64) error {
	if got != want {
		return fmt.Errorf("durability check: %s: store holds %d, want %d", what, got, want)
	}
	return nil
}

// PGConnect opens one connection.
func PGConnect(ctx context.Context, pgURL string) (*pgx.Conn, error) { return pgx.Connect(ctx, pgURL) }
