package mirror_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// TestSessionVarRows: a write's session variables (Change.SessionVars, as
// SessionSet and a run's end report them) become session_var rows in its
// transaction and reach the warm store: a set value is stored, a removed
// one (the run's end drops a variable it wrote without keep_until)
// deleted, and each bumps the run's version.
func TestSessionVarRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		ctx := context.Background()
		c := open(mirror.Hook())
		if _, err := c.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", LeaseTTL: time.Minute})
		if err != nil || r == nil {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		if _, err := c.OnRunStart(ctx, &state.RunStartParams{RunID: r.ID, Lease: r.Lease()}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*state.SessionSetParams{
			{SessionID: "sess", Key: "kept", Value: []byte(`{"n":42}`), KeepFor: time.Hour},
			{SessionID: "sess", Key: "gone", Value: []byte(`1`)},
		} {
			p.RunID, p.Lease = r.ID, r.Lease()
			if _, err := c.SessionSet(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		ws := memory.New()
		d := mirror.NewDrainer(c, mirror.Config{Warm: ws}, nil)
		if _, err := d.DrainOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := ws.GetSessionVar(ctx, "default", "sess", "gone"); err != nil || string(v) != `1` {
			t.Fatalf("warm gone before the run's end = %s, %v; want 1", v, err)
		}
		before, err := ws.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.OnRunComplete(ctx, &state.RunCompleteParams{RunID: r.ID, Lease: r.Lease()}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DrainOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := ws.GetSessionVar(ctx, "default", "sess", "kept"); err != nil || string(v) != `{"n":42}` {
			t.Fatalf("warm kept = %s, %v; want {\"n\":42}", v, err)
		}
		if _, err := ws.GetSessionVar(ctx, "default", "sess", "gone"); !errors.Is(err, warm.ErrNotFound) {
			t.Fatalf("warm gone after the run's end: %v, want ErrNotFound", err)
		}
		if e, err := ws.GetRun(ctx, r.ID); err != nil || e.Version <= before.Version || e.Status != "succeeded" {
			t.Fatalf("warm run = %+v, %v; want succeeded at a version above %d", e, err, before.Version)
		}
	})
}
