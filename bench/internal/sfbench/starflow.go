package sfbench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/starflow/starflow"
	"github.com/starflow/starflow/bench/internal/workload"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
)

// Workflow is the benchmark workflow: workload.StepsPerRun context_set
// steps, each setting one variable (a no-op with a durable step record:
// ledger row, events and checkpoint).
func Workflow(name string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nsteps:\n", name)
	for i := 0; i < workload.StepsPerRun; i++ {
		fmt.Fprintf(&b, "  - id: %s\n    context_set: {v%02d: %d}\n", workload.StepName(i), i, i)
	}
	return []byte(b.String())
}

// OpenStore opens and migrates a Starflow store for rc: a fresh
// schema on PostgreSQL (dropped by the returned cleanup) or a file in
// rc.Dir on SQLite. check counts rows of the store's tables.
func OpenStore(ctx context.Context, rc workload.RunConfig) (store state.Adapter, check func(query string) (int64, error), cleanup func(), err error) {
	switch rc.Store {
	case workload.StorePG:
		schema := workload.NewName("sbs_starflow")
		s, err := pgstore.Open(ctx, pgstore.Config{URL: rc.PGURL, Schema: schema, MaxConns: int32(rc.PGConns)})
		if err != nil {
			return nil, nil, nil, err
		}
		cleanup = func() { s.Close(); _ = workload.DropSchema(ctx, rc.PGURL, schema) }
		if err := s.Migrate(ctx); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		prefix := pgx.Identifier{schema}.Sanitize() + "."
		check = func(query string) (int64, error) {
			return workload.PGCount(ctx, rc.PGURL, strings.ReplaceAll(query, "{schema}", prefix))
		}
		return s, check, cleanup, nil
	case workload.StoreSQLite:
		path := filepath.Join(rc.Dir, "starflow.db")
		s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Synchronous: rc.Sync})
		if err != nil {
			return nil, nil, nil, err
		}
		cleanup = func() { s.Close() }
		if err := s.Migrate(ctx); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		check = func(query string) (int64, error) {
			return workload.SQLiteCount(ctx, path, strings.ReplaceAll(query, "{schema}", ""))
		}
		return s, check, cleanup, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown store %q", rc.Store)
}

// Run measures Starflow through its public Go API: one engine
// (in-process runner, Concurrency = c), c producers calling Enqueue while
// it runs, and one goroutine calling WaitRun on each run in turn.
func Run(ctx context.Context, rc workload.RunConfig) (workload.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	store, check, cleanup, err := OpenStore(ctx, rc)
	if err != nil {
		return workload.Result{}, err
	}
	defer cleanup()
	eng, err := starflow.New(starflow.Config{Store: store, Concurrency: rc.Concurrency, Logger: workload.DiscardLogger, WakeKeys: WakeKeys})
	if err != nil {
		return workload.Result{}, err
	}
	const name = "sbs-steps"
	if _, err := eng.Apply(ctx, "sbs.yaml", Workflow(name)); err != nil {
		return workload.Result{}, err
	}
	if err := eng.Start(ctx); err != nil {
		return workload.Result{}, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = eng.Stop(sctx)
		}
	}
	defer stop()

	ids := make(chan string, rc.Runs)
	prodErr := make(chan error, 1)
	start := time.Now()
	go func() {
		prodErr <- workload.Produce(ctx, rc.Concurrency, rc.Runs, func(ctx context.Context, i int) error {
			run, err := eng.Enqueue(ctx, name, nil, nil)
			if err != nil {
				return err
			}
			ids <- run.ID
			return nil
		})
		close(ids)
	}()
	done := 0
	for id := range ids {
		run, err := eng.WaitRun(ctx, id)
		if err != nil {
			return workload.Result{}, fmt.Errorf("wait for run %s: %w", id, err)
		}
		if run.Status != "succeeded" {
			return workload.Result{}, fmt.Errorf("run %s ended %s: %s", id, run.Status, run.Error)
		}
		done++
	}
	elapsed := time.Since(start)
	if err := <-prodErr; err != nil {
		return workload.Result{}, err
	}
	stop()

	want := int64(done * workload.StepsPerRun)
	steps, err := check(`SELECT count(*) FROM {schema}workflow_steps WHERE status = 'succeeded'`)
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	if err := workload.CheckCount("succeeded workflow_steps rows", steps, want); err != nil {
		return workload.Result{}, err
	}
	cps, err := check(`SELECT count(*) FROM {schema}workflow_run_checkpoints`)
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	if err := workload.CheckCount("workflow_run_checkpoints rows", cps, want); err != nil {
		return workload.Result{}, err
	}
	checked := fmt.Sprintf("%d succeeded step rows, %d checkpoints", steps, cps)
	if gc, ok := store.(interface{ GroupCommitStats() (int64, int64) }); ok {
		if b, w := gc.GroupCommitStats(); b > 0 {
			checked += fmt.Sprintf("; group commit: %d writes in %d batches (%.1f a batch)", w, b, float64(w)/float64(b))
		}
	}
	return workload.Result{Elapsed: elapsed, Steps: done * workload.StepsPerRun, Checked: checked}, nil
}

// WakeKeys is the wake-token key ring every engine and process of the
// harness uses (a PostgreSQL store keeps no signing secret, so every
// process must be given the same ring; the harness's workflows never wait,
// so its value does not matter).
const WakeKeys = "sbs:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
