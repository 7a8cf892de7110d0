package mirror_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// afterGetRun is a warm store that runs fn once, right after the first
// GetRun of run id that follows arm: between the sweep's warm read and
// its repair.
type afterGetRun struct {
	warm.Store
	mu sync.Mutex
	id string
	fn func()
}

func (a *afterGetRun) arm(id string, fn func()) {
	a.mu.Lock()
	a.id, a.fn = id, fn
	a.mu.Unlock()
}

func (a *afterGetRun) GetRun(ctx context.Context, id string) (*warm.RunEntry, error) {
	e, err := a.Store.GetRun(ctx, id)
	a.mu.Lock()
	fn := a.fn
	if id != a.id {
		fn = nil
	}
	if fn != nil {
		a.fn = nil
	}
	a.mu.Unlock()
	if fn != nil {
		fn()
	}
	return e, err
}

// TestSweepNeverWritesOlderVersion: while the sweep compares a run, the
// run moves on (one more step: two versions) and the drainer applies the
// newer version before the sweep's repair. The repair must not leave the
// older version it read over it: for a corrupted entry (same version,
// other content; the forced write) and a missing one (the version
// compare-and-set), warm ends equal to cold at the newest version.
func TestSweepNeverWritesOlderVersion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, mem *memory.Store, e *warm.RunEntry)
	}{
		{"diverged", func(t *testing.T, mem *memory.Store, e *warm.RunEntry) {
			e.Status = "succeeded"
			if _, err := mem.PutRun(context.Background(), e, true); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing", func(t *testing.T, mem *memory.Store, e *warm.RunEntry) {
			if err := mem.DeleteRun(context.Background(), e.RunID); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := openSQLite(t, filepath.Join(t.TempDir(), "starflow.db"), []state.TxHook{mirror.Hook()})
			mem := memory.New()
			ws := &afterGetRun{Store: mem}
			m := newMirror(t, c, mirror.Config{Warm: ws})
			r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
			if err != nil {
				t.Fatal(err)
			}
			running := startRun(t, m, r.ID)
			eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
			e, err := mem.GetRun(ctx, running.ID)
			if err != nil {
				t.Fatal(err)
			}
			swept := e.Version
			tc.damage(t, mem, e)
			ws.arm(running.ID, func() {
				step(t, m, running, "late")
				eventually(t, "the late step to drain", func() bool {
					got, err := mem.GetRun(ctx, running.ID)
					return pending(t, c) == 0 && err == nil && got.Version > swept
				})
			})
			if _, err := m.Sweeper().SweepOnce(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := mem.GetRun(ctx, running.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := coldEntry(t, c, running.ID)
			if got.Version != want.Version || mirror.Hash(got) != want.Hash {
				t.Fatalf("after the sweep warm is at version %d (status %s), cold at %d (swept at %d): the sweep wrote an older version over the drained one",
					got.Version, got.Status, want.Version, swept)
			}
		})
	}
}
