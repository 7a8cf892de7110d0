package mirror_test

import (
	"context"
	"testing"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm/natskv"
)

// TestNATSWarm: the mirror over the NATS JetStream KV store (an embedded
// server of the test's own): runs drain to entries equal to cold, and the
// sweep restores a deleted and a corrupted entry.
func TestNATSWarm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		ctx := context.Background()
		ws, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: t.TempDir()}, natskv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		c := open(mirror.Hook())
		m := newMirror(t, c, mirror.Config{Warm: ws})
		var ids []string
		for range 3 {
			ids = append(ids, execRun(t, m, 3).ID)
		}
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		for _, id := range ids {
			eventually(t, "warm to match cold", func() bool { return matches(t, c, ws, id) })
		}
		// Let the end-of-run reconciliations finish first (whatever their
		// result: the entries already match).
		eventually(t, "the reconciliations", func() bool { return reconciliations(m) == 3 })
		if err := ws.DeleteRun(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		bad, err := ws.GetRun(ctx, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		bad.Phase = "corrupted"
		if _, err := ws.PutRun(ctx, bad, true); err != nil {
			t.Fatal(err)
		}
		res, err := m.Sweeper().SweepOnce(ctx)
		if err != nil || res.Missing != 1 || res.Diverged != 1 {
			t.Fatalf("sweep = %+v, %v; want 1 missing, 1 diverged", res, err)
		}
		for _, id := range ids {
			if !matches(t, c, ws, id) {
				t.Fatalf("warm entry of %s not repaired", id)
			}
		}
	})
}
