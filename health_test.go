package starflow_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/warm/memory"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHealthHidesDriverErrors: with the cold store failing (its schema
// dropped under it), Health says "cold store unreachable" and "outbox
// unreadable" and nothing of the driver's error — no schema, table,
// user or database name, no SQLSTATE — which goes to the log (issue 10
// item 6).
func TestHealthHidesDriverErrors(t *testing.T) {
	t.Parallel()
	store := openPG(t)
	var logs syncBuffer
	eng, err := starflow.New(starflow.Config{
		Store: store, Warm: memory.New(), NoRunner: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if hl := eng.Health(ctx); !hl.StoreOK || hl.StoreError != "" || hl.OutboxError != "" {
		t.Fatalf("health of a working store: %+v", hl)
	}
	var schema string
	if err := store.Pool().QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	hl := eng.Health(ctx)
	if hl.Status != "unavailable" || hl.StoreOK || hl.StoreError != starflow.HealthStoreUnreachable || hl.OutboxError != starflow.HealthOutboxUnreadable {
		t.Fatalf("health with the schema dropped: %+v", hl)
	}
	for _, leak := range []string{"SQLSTATE", "42P01", "workflow_runs", "mirror_outbox", schema, "postgres", "relation"} {
		if strings.Contains(hl.StoreError+hl.OutboxError+hl.WarmError, leak) {
			t.Errorf("health answer carries %q: %+v", leak, hl)
		}
	}
	if l := logs.String(); !strings.Contains(l, "SQLSTATE 42P01") || !strings.Contains(l, "health: the cold store did not answer") {
		t.Errorf("the driver's error is not in the log:\n%s", l)
	}
}
