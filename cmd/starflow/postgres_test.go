package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/starflow/starflow/internal/pgtest"
	"strings"
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

// TestStoreURLSchemaChecked: an invalid schema= in a PostgreSQL store URL
// is an error naming it, before anything connects (the URL's host is
// unroutable, so a connection attempt would fail otherwise); it is never
// silently ignored (issue 10 item 6).
func TestStoreURLSchemaChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ query, frag string }{
		{"schema=a;drop", "invalid semicolon separator"},
		{"sslmode=disable;schema=x", "invalid semicolon separator"},
		{"schema=a%3Bdrop%20table", "lower-case letters"},
		{"schema=", "schema=: schema name is empty"},
		{"schema=" + strings.Repeat("s", 64), "at most 63"},
		{"schema=a&schema=b", "given 2 times"},
		{"schema=Prod", "lower-case letters"},
		{"schema=pg_toast", "reserved"},
		{"Schema=prod", `"Schema"`},
		{"SCHEMA=prod&sslmode=disable", `"SCHEMA"`},
	} {
		_, err := openPostgres(context.Background(), "postgres://u:secret@192.0.2.1:1/db?"+tc.query, 0, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.frag) || strings.Contains(err.Error(), "dial") || strings.Contains(err.Error(), "secret") {
			t.Errorf("?%s: %v, want an error containing %q (without connecting or the password)", tc.query, err, tc.frag)
		}
	}
}
