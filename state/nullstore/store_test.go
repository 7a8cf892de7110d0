package nullstore_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/state/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance: every case of the suite but close-and-reopen, hooks
// included.
func TestConformance(t *testing.T) {
	statetest.RunOpener(t, func(t *testing.T, hooks []state.TxHook) state.Adapter {
		s, err := nullstore.Open(nullstore.Config{Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, statetest.Options{SetCreatedAt: func(t *testing.T, a state.Adapter, at time.Time, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := a.(*nullstore.Store).DB().ExecContext(t.Context(), `UPDATE workflow_runs SET created_at = ?1 WHERE id = ?2`,
				at.UTC().Format("2006-01-02T15:04:05.000Z"), id); err != nil {
				t.Fatalf("set created_at of %s: %v", id, err)
			}
		}
	}})
}

// TestPrivate: two Stores share nothing, and a Store is not durable.
func TestPrivate(t *testing.T) {
	a, b := nullstore.New(), nullstore.New()
	defer a.Close()
	defer b.Close()
	if a.Capabilities().Durable {
		t.Error("nullstore says it is durable")
	}
	r, err := a.EnqueueRun(t.Context(), &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := b.ClaimRun(t.Context(), &state.ClaimRunParams{RunnerID: "x", LeaseTTL: time.Minute}); err != nil || c != nil {
		t.Fatalf("the other store claimed %+v, %v; want nothing", c, err)
	}
	if c, err := a.ClaimRun(t.Context(), &state.ClaimRunParams{RunnerID: "x", LeaseTTL: time.Minute}); err != nil || c == nil || c.ID != r.ID {
		t.Fatalf("ClaimRun = %+v, %v; want run %s", c, err, r.ID)
	}
}
