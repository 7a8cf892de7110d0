package mirror_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm/natskv"
)

// TestOversizedEntryDoesNotStall: a run whose warm entry exceeds the NATS
// server's max_payload is refused by natskv with warm.ErrInvalid; the
// drainer skips that row (starflow_outbox_skipped_total) instead of
// retrying it forever, so the rows written after it drain, and the sweep
// is not stopped by it either.
func TestOversizedEntryDoesNotStall(t *testing.T) {
	const maxPayload = 16 << 10
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: maxPayload, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10 s")
	}
	ctx := context.Background()
	ws, err := natskv.Open(ctx, ns.ClientURL(), natskv.Options{MemoryStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })

	c := openSQLite(t, filepath.Join(t.TempDir(), "starflow.db"), []state.TxHook{mirror.Hook()})
	m := newMirror(t, c, mirror.Config{Warm: ws, BackoffMin: 10 * time.Millisecond})

	// The oversized run: its completion row (with the output) is too big.
	r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	big := startRun(t, m, r.ID)
	big2, _ := json.Marshal(strings.Repeat("x", 2*maxPayload))
	if _, err := m.OnRunComplete(ctx, &state.RunCompleteParams{RunID: big.ID, Lease: big.Lease(), Output: big2}); err != nil {
		t.Fatal(err)
	}
	// Runs written after it must still reach the warm tier.
	var ids []string
	for range 2 {
		ids = append(ids, execRun(t, m, 2).ID)
	}
	eventually(t, "the outbox to drain past the oversized row", func() bool { return pending(t, c) == 0 })
	for _, id := range ids {
		eventually(t, "warm to match cold", func() bool { return matches(t, c, ws, id) })
	}
	if n := testutil.ToFloat64(m.Metrics().Skipped); n < 1 {
		t.Fatalf("starflow_outbox_skipped_total = %v; want the oversized row counted", n)
	}
	// The sweep cannot repair the oversized entry either, but it goes on.
	res, err := m.Sweeper().SweepOnce(ctx)
	if err != nil {
		t.Fatalf("SweepOnce stopped on the oversized entry: %v", err)
	}
	if res.Skipped < 1 {
		t.Fatalf("sweep = %+v; want the oversized run skipped", res)
	}
}
