package starflow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/warm/memory"
)

// TestStartContextEndStopsEngine: an engine whose Start context is
// cancelled, and whose Stop is never called, stops as Stop does without a
// grace period: the run in flight is cancelled and releases its lease
// (queued again, no lease, no runner_lost), its heartbeats end, and every
// goroutine the engine started — runner, heartbeats, presence,
// maintenance, the warm tier's drainer — is gone. (Before, every loop ran
// on a context detached from Start's, so the heartbeats went on renewing
// the lease of a run nobody would finish.) Not parallel: it counts the
// goroutines of the whole test binary.
func TestStartContextEndStopsEngine(t *testing.T) {
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db"),
		Synchronous: sqlitestore.SynchronousNormal, Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws := memory.New()
	defer ws.Close()
	before := goleak.IgnoreCurrent() // the store's own goroutines included
	rs := &renewals{Adapter: store}
	eng, err := starflow.New(starflow.Config{Store: rs, Warm: ws, Logger: quietLogger(), Maintenance: true,
		LeaseTTL: 2 * time.Second, Heartbeat: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		WarmOptions: starflow.WarmOptions{DrainPoll: 20 * time.Millisecond, PresenceInterval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // should the engine not stop by itself
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(stop)
	})
	working := make(chan struct{})
	if err := eng.RegisterStep("work", func(ctx context.Context, _ *step.Request) (any, error) {
		close(working)
		<-ctx.Done() // works until it is stopped
		return nil, context.Cause(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	d, err := eng.Apply(bg, "work.yaml", []byte("name: work\nsteps:\n  - id: a\n    work: {}\n    timeout: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := eng.Enqueue(bg, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-working:
	case <-time.After(20 * time.Second):
		t.Fatal("the step never started")
	}
	eventually(t, "a renewal of the lease", func() bool { return rs.ok.Load() > 0 })
	cancel()

	eventually(t, "the run released (queued again, no lease)", func() bool {
		r, err := store.GetRun(bg, &state.GetRunParams{ID: run.ID})
		return err == nil && r.ClaimState == starflowtype.ClaimQueued && r.LeasedBy == ""
	})
	// The heartbeats have ended: no renewal for many heartbeat intervals.
	calls := rs.calls.Load()
	time.Sleep(10 * 50 * time.Millisecond)
	if n := rs.calls.Load(); n != calls {
		t.Errorf("%d lease renewals after the run was released: the heartbeat goes on", n-calls)
	}
	evs, err := store.ListEvents(bg, &state.ListEventsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == starflowtype.EventRunnerLost {
			t.Errorf("runner_lost: %s", e.Payload)
		}
	}
	// Every goroutine the engine started has ended, with no Stop.
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Start's context ended: %v", err)
	}
	// The engine stopped itself: a Stop now has nothing left to do.
	stop, stopCancel := context.WithTimeout(bg, 10*time.Second)
	defer stopCancel()
	if err := eng.Stop(stop); err != nil {
		t.Errorf("Stop after the context ended: %v", err)
	}
}
