package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// defaultURL is the database of the development machines and CI.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is STARFLOW_TEST_PG_URL, or defaultURL.
func testURL() string {
	if u := os.Getenv("STARFLOW_TEST_PG_URL"); u != "" {
		return u
	}
	return defaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireDB skips t when PostgreSQL cannot be reached, or fails it when the
// CI variable is set: CI must never pass by skipping the PostgreSQL tests.
func requireDB(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("PostgreSQL at %s is not reachable and CI is set, so the PostgreSQL tests may not be skipped: %v", testURL(), reachErr)
	}
	t.Skipf("PostgreSQL at %s is not reachable (%v); set STARFLOW_TEST_PG_URL to run the pgstore tests", testURL(), reachErr)
}

// adminExec runs sql on a connection of its own.
func adminExec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newSchema returns a fresh schema name for t and drops the schema (if a
// store created it) when t ends, after every store of t is closed.
func newSchema(t testing.TB) string {
	t.Helper()
	requireDB(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { adminExec(t, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// open opens and migrates a store on schema with hooks; Close runs at the
// end of t.
func open(t testing.TB, schema string, hooks []state.TxHook) *pgstore.Store {
	t.Helper()
	return openConfig(t, pgstore.Config{Schema: schema, Hooks: hooks})
}

// openConfig opens and migrates a store with cfg (URL defaults to
// testURL); Close runs at the end of t.
func openConfig(t testing.TB, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = testURL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", cfg.Schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(schema %s): %v", cfg.Schema, err)
	}
	return s
}

// fresh opens a migrated store on a new schema.
func fresh(t testing.TB) *pgstore.Store {
	t.Helper()
	return open(t, newSchema(t), nil)
}

// openFresh is the statetest.Opener: a new schema per test.
func openFresh(t *testing.T, hooks []state.TxHook) state.Adapter {
	return open(t, newSchema(t), hooks)
}

// reopen is the statetest.Reopener: close a and open its schema again.
func reopen(t *testing.T, a state.Adapter, hooks []state.TxHook) state.Adapter {
	t.Helper()
	s, ok := a.(*pgstore.Store)
	if !ok {
		t.Fatalf("reopen: %T is not a *pgstore.Store", a)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close before reopening: %v", err)
	}
	return open(t, s.Schema(), hooks)
}

func TestConformance(t *testing.T) {
	statetest.RunOpener(t, openFresh, statetest.Options{Reopen: reopen})
}
