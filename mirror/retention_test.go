package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
	"github.com/starflow/starflow/warm/natskv"
)

// TestRetentionRemovesWarmEntries: the runs a retention pass removes from
// the cold store are removed from the warm store by the drainer — entry,
// steps, events feed and progress — while the runs it keeps stay as they
// were; on SQLite and PostgreSQL, over the memory store and over NATS
// JetStream KV (an embedded server). (Before, the runs phase told the
// warm tier nothing, and no warm store drops a finished run by itself.)
func TestRetentionRemovesWarmEntries(t *testing.T) {
	warms := []struct {
		name string
		open func(t *testing.T) warm.Store
	}{
		{"memory", func(t *testing.T) warm.Store {
			ws := memory.New()
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
		{"nats", func(t *testing.T) warm.Store {
			ws, err := natskv.OpenEmbedded(context.Background(), natskv.EmbeddedOptions{Dir: t.TempDir()}, natskv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
	}
	for _, w := range warms {
		t.Run(w.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
				ctx := context.Background()
				ws := w.open(t)
				c := open(mirror.Hook())
				m := newMirror(t, c, mirror.Config{Warm: ws})
				old := execRun(t, m, 2)
				if err := ws.PutProgress(ctx, &warm.Progress{RunID: old.ID, StepID: "s1", Fraction: 1, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
				ageEnded(t, c, 10)
				kept := execRun(t, m, 2)
				eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
				for _, id := range []string{old.ID, kept.ID} {
					eventually(t, "warm to match cold", func() bool { return matches(t, c, ws, id) })
				}
				if evs, err := ws.ListEvents(ctx, old.ID, 0); err != nil || len(evs) == 0 {
					t.Fatalf("setup: the old run's warm events: %d, %v", len(evs), err)
				}

				rep, err := m.CollectGarbage(ctx, &state.GCParams{})
				if err != nil || rep.Runs != 1 {
					t.Fatalf("CollectGarbage = %+v, %v; want the old run removed", rep, err)
				}
				eventually(t, "the removed run's warm entry to go", func() bool {
					_, err := ws.GetRun(ctx, old.ID)
					return errors.Is(err, warm.ErrNotFound)
				})
				if steps, err := ws.ListSteps(ctx, old.ID); err != nil || len(steps) != 0 {
					t.Errorf("warm steps of the removed run: %d, %v", len(steps), err)
				}
				if evs, err := ws.ListEvents(ctx, old.ID, 0); err != nil || len(evs) != 0 {
					t.Errorf("warm events of the removed run: %d, %v", len(evs), err)
				}
				if ps, err := ws.ListProgress(ctx, old.ID); err != nil || len(ps) != 0 {
					t.Errorf("warm progress of the removed run: %d, %v", len(ps), err)
				}
				eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
				if !matches(t, c, ws, kept.ID) {
					t.Error("the kept run's warm entry changed")
				}
				if evs, err := ws.ListEvents(ctx, kept.ID, 0); err != nil || len(evs) == 0 {
					t.Errorf("the kept run's warm events: %d, %v", len(evs), err)
				}
				// The sweep does not bring the removed run back.
				if _, err := m.Sweeper().SweepOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := ws.GetRun(ctx, old.ID); !errors.Is(err, warm.ErrNotFound) {
					t.Errorf("after a sweep, the removed run's entry: %v, want ErrNotFound", err)
				}
			})
		})
	}
}

// ageEnded moves the completed_at of every ended run of c back by days.
func ageEnded(t *testing.T, c cold, days int) {
	t.Helper()
	var err error
	switch s := c.(type) {
	case *sqlitestore.Store:
		_, err = s.DB().ExecContext(t.Context(), `UPDATE workflow_runs
			SET completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', completed_at, ?1) WHERE completed_at IS NOT NULL`,
			fmt.Sprintf("-%d days", days))
	case *pgstore.Store:
		_, err = s.Pool().Exec(t.Context(), `UPDATE workflow_runs SET completed_at = completed_at - $1::int * interval '1 day'
			WHERE completed_at IS NOT NULL`, days)
	default:
		t.Fatalf("no way to age the runs of a %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
}
