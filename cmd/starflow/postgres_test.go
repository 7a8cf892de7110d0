package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/starflow/starflow/internal/pgtest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state/pgstore"
)

// TestRunnerConnectionsEndIdleTransactionsBeforeTheLease: a runner's
// PostgreSQL connections end a transaction left idle for longer than two
// thirds of the lease TTL (SPEC §5: below the TTL).
func TestRunnerConnectionsEndIdleTransactionsBeforeTheLease(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	url := pgtest.URL()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_cli_" + hex.EncodeToString(b[:])
	defer func() {
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		conn.Close(context.Background())
	}()
	store, err := openPostgres(ctx, url+"&schema="+schema, 9*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var got string
	if err := store.(*pgstore.Store).Pool().QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "6s" {
		t.Fatalf("idle_in_transaction_session_timeout = %s, want 6s for a 9 s lease", got)
	}
}
