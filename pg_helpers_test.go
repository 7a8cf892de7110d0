package starflow_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state/pgstore"
)

// pgURL is the PostgreSQL the tests use: STARFLOW_TEST_PG_URL, or the
// development machines' and CI's local database.
func pgURL() string {
	if u := os.Getenv("STARFLOW_TEST_PG_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// openPG opens a pgstore on a fresh schema dropped at cleanup. Without a
// reachable PostgreSQL it skips, except under CI, where it fails.
func openPG(tb testing.TB) *pgstore.Store {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("PostgreSQL unreachable under CI: %v", err)
		}
		tb.Skipf("PostgreSQL unreachable (%v); set STARFLOW_TEST_PG_URL", err)
	}
	conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_root_" + hex.EncodeToString(b[:])
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pgURL(), Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		if c, err := pgx.Connect(context.Background(), pgURL()); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	if err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return s
}
