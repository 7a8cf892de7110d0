package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/workflow"
)

// TestSessionKeepUntilDurationOnDatabaseClock: `session_write keep_until:
// 1h` is measured on the database's clock (SPEC §5; issue 10 item 9). The
// runner's clock here is three hours slow: computed on it, keep_until
// would be two hours in the past, and the variable expired at once (the
// next step reads it back). The stored keep_until is exactly one hour
// after the database's updated_at of the write.
func TestSessionKeepUntilDurationOnDatabaseClock(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	slow := func() time.Time { return time.Now().Add(-3 * time.Hour) }
	e, err := New(Config{Store: store, Now: slow, EphemeralWakeKey: true})
	if err != nil {
		t.Fatal(err)
	}
	src := []byte(`name: keep
steps:
  - id: w
    session_write: {session: s, key: k, value: 42, keep_until: 1h}
  - id: r
    session_read: {session: s, key: k, default: "expired"}
`)
	def, err := workflow.Parse("keep.yaml", src, e.ParseOptions())
	if err != nil {
		t.Fatal(err)
	}
	row, err := store.PutDefinition(ctx, &state.PutDefinitionParams{Name: def.Name, Revision: def.Revision(), Spec: def.Canonical(), Source: string(src)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := store.EnqueueRun(ctx, &state.EnqueueRunParams{DefinitionID: row.ID, WorkflowName: def.Name, WorkflowRevision: row.Revision, Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", LeaseTTL: time.Minute})
	if err != nil || claimed == nil || claimed.ID != run.ID {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	lease := claimed.Lease()
	started, err := store.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Execute(ctx, started, lease)
	if err != nil || out != OutcomeSucceeded {
		t.Fatalf("Execute = %v, %v", out, err)
	}
	end, err := store.GetRun(ctx, &state.GetRunParams{ID: run.ID})
	if err != nil || end.Status != starflowtype.RunSucceeded || string(end.Output) != "42" {
		t.Fatalf("run %s %q: output %s, want 42 (the variable read back, not expired)", end.Status, end.Error, end.Output)
	}
	v, err := store.SessionGet(ctx, &state.SessionGetParams{SessionID: "s", Key: "k"})
	if err != nil {
		t.Fatalf("the kept variable: %v", err)
	}
	if d := v.KeepUntil.Sub(v.UpdatedAt); d < time.Hour-time.Millisecond || d > time.Hour+time.Millisecond {
		t.Fatalf("keep_until - updated_at = %s, want 1h on the database's clock (keep_until %s, updated_at %s)", d, v.KeepUntil, v.UpdatedAt)
	}
}
