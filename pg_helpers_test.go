package starflow_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/starflow/starflow/internal/pgtest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state/pgstore"
)

// pgURL is the PostgreSQL the tests use: STARFLOW_TEST_PG_URL, or the
// development machines' and CI's local database.
func pgURL() string { return pgtest.URL() }

// openPG opens a pgstore on a fresh schema dropped at cleanup. Without a
// reachable PostgreSQL it skips, except under CI, where it fails.
func openPG(tb testing.TB) *pgstore.Store {
	tb.Helper()
	ctx := context.Background()
	pgtest.Require(tb)
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

// pgWakeKeys is the wake-key ring of the PostgreSQL tests: a PostgreSQL
// store keeps no signing secret, so every process is given the ring (as
// STARFLOW_WAKE_KEYS in production).
const pgWakeKeys = "pgtest:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
