package starflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
)

const gcTestWorkflow = `name: gc-live
steps:
  - id: a
    context_set: {x: 1}
  - id: b
    context_set: {y: 2}
  - id: c
    context_set: {z: 3}
`

// ageEndedRuns moves the completed_at of every ended run of store back by
// eight days.
func ageEndedRuns(t *testing.T, store state.Adapter) {
	t.Helper()
	var err error
	switch s := store.(type) {
	case *sqlitestore.Store:
		_, err = s.DB().ExecContext(t.Context(), `UPDATE workflow_runs
			SET completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', completed_at, '-8 days') WHERE completed_at IS NOT NULL`)
	case *pgstore.Store:
		_, err = s.Pool().Exec(t.Context(), `UPDATE workflow_runs SET completed_at = completed_at - interval '8 days'
			WHERE completed_at IS NOT NULL`)
	default:
		t.Fatalf("no way to age the runs of a %T", store)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectGarbageWithLiveRunner: a gc pass in small batches runs again
// and again while the runner executes new runs on the same store; every new
// run succeeds with its whole ledger, and exactly the old runs go. SQLite
// (one writer: the batches interleave with the runner's writes) and
// PostgreSQL (row locks: the batches skip what runners hold).
func TestCollectGarbageWithLiveRunner(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			var store state.Adapter
			cfg := starflow.Config{Concurrency: 8, Logger: quietLogger()}
			if dialect == "sqlite" {
				h := newHarness(t, starflow.Config{})
				store = h.store
			} else {
				store = openPG(t)
				cfg.WakeKeys = pgWakeKeys
			}
			cfg.Store = store
			eng, err := starflow.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if _, err := eng.Apply(ctx, "gc.yaml", []byte(gcTestWorkflow)); err != nil {
				t.Fatal(err)
			}
			if err := eng.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer eng.Stop(context.WithoutCancel(ctx))
			runAll := func(n int) []string {
				var mu sync.Mutex
				var ids []string
				var wg sync.WaitGroup
				errs := make(chan error, n)
				sem := make(chan struct{}, 4)
				for range n {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						run, err := eng.Enqueue(ctx, "gc-live", nil, nil)
						if err == nil {
							run, err = eng.WaitRun(ctx, run.ID)
						}
						if err == nil && run.Status != starflowtype.RunSucceeded {
							err = fmt.Errorf("run %s %s: %s", run.ID, run.Status, run.Error)
						}
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						ids = append(ids, run.ID)
						mu.Unlock()
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				return ids
			}
			old := runAll(30)
			ageEndedRuns(t, store)

			done, stop := make(chan struct{}), make(chan struct{})
			var total state.GCReport
			var gcErr error
			passes := 0
			go func() {
				defer close(done)
				for {
					rep, err := eng.CollectGarbage(ctx, state.GCParams{Batch: 4})
					total.Add(rep)
					passes++
					if err != nil {
						gcErr = err
						return
					}
					select {
					case <-stop: // the new runs all ended: gc ran all along
						return
					default:
					}
				}
			}()
			fresh := runAll(30)
			close(stop)
			<-done
			if gcErr != nil {
				t.Fatalf("CollectGarbage: %v", gcErr)
			}
			if total.Runs != int64(len(old)) || total.Steps != int64(3*len(old)) || total.Checkpoints != int64(3*len(old)) {
				t.Errorf("gc removed %+v in %d passes, want the %d old runs with 3 steps and 3 checkpoints each", total, passes, len(old))
			}
			for _, id := range old {
				if _, err := store.GetRun(ctx, &state.GetRunParams{ID: id}); !errors.Is(err, starflowtype.ErrNotFound) {
					t.Errorf("old run %s: %v, want it removed", id, err)
				}
			}
			for _, id := range fresh {
				steps, err := store.ListSteps(ctx, &state.ListStepsParams{RunID: id})
				if err != nil || len(steps) != 3 {
					t.Errorf("new run %s: %d steps, %v; want its 3", id, len(steps), err)
				}
			}
		})
	}
}

// TestRetentionMaintenancePass: the maintenance leader's retention pass
// removes the runs past their age on its own; Interval -1 turns it off.
func TestRetentionMaintenancePass(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, starflow.Config{})
			h.start()
			old := h.runToEnd(gcTestWorkflow, nil)
			ageEndedRuns(t, h.store)
			interval := 50 * time.Millisecond
			if !on {
				interval = -1
			}
			leading := make(chan struct{})
			var once sync.Once
			eng2, err := starflow.New(starflow.Config{Store: h.store, NoRunner: true, Maintenance: true, Logger: quietLogger(),
				Retention: starflow.RetentionConfig{Interval: interval}, OnMaintenanceLeader: func(l bool) {
					if l {
						once.Do(func() { close(leading) })
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng2.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer eng2.Stop(context.WithoutCancel(t.Context()))
			<-leading
			gone := func() bool {
				_, err := h.store.GetRun(t.Context(), &state.GetRunParams{ID: old.ID})
				if err != nil && !errors.Is(err, starflowtype.ErrNotFound) {
					t.Fatal(err)
				}
				return err != nil
			}
			if !on {
				// Ten intervals of a pass that would run at once.
				time.Sleep(500 * time.Millisecond)
				if gone() {
					t.Fatal("the run went with the retention pass turned off")
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); !gone(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("run %s is still there after 10 s of retention passes", old.ID)
				}
			}
		})
	}
}
