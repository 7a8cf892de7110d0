package starflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// hangingRefresh is a store whose heartbeats never return (a database
// that stopped answering) until their context ends.
type hangingRefresh struct{ state.Adapter }

func (h hangingRefresh) RefreshLease(ctx context.Context, _ *state.RefreshLeaseParams) (time.Time, error) {
	<-ctx.Done()
	return time.Time{}, ctx.Err()
}

// TestRunStopsBeforeItsLeaseExpires: when heartbeats cannot renew the
// lease, the runner cancels the run before lease_until (database clock;
// SQLite's is this host's), so its steps stop before another runner could
// claim the run.
func TestRunStopsBeforeItsLeaseExpires(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	eng, err := starflow.New(starflow.Config{Store: hangingRefresh{h.store}, Logger: quietLogger(),
		LeaseTTL: time.Second, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan time.Time, 1)
	eng.RegisterStep("wait_for_cancel", func(ctx context.Context, _ *step.Request) (any, error) {
		<-ctx.Done()
		cancelled <- time.Now()
		return nil, ctx.Err()
	})
	ctx := context.Background()
	d, err := eng.Apply(ctx, "l.yaml", []byte("name: lease\nsteps:\n  - id: a\n    wait_for_cancel: {}\n    timeout: 1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	var at time.Time
	select {
	case at = <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the run was not cancelled although its lease could not be renewed")
	}
	r, err := h.store.GetRun(ctx, &state.GetRunParams{ID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !at.Before(r.LeaseUntil) {
		t.Fatalf("cancelled at %s, not before lease_until %s", at.Format(time.RFC3339Nano), r.LeaseUntil.Format(time.RFC3339Nano))
	}
}
