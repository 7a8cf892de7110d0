package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/starflow/starflow/bench/internal/workload"
)

// riverArgs is the benchmark job: one job per run.
type riverArgs struct {
	N int `json:"n"`
}

// Kind implements river.JobArgs.
func (riverArgs) Kind() string { return "sbs_steps" }

// riverWorker runs workload.StepsPerRun resumable steps (river.ResumableStep), each
// persisting its checkpoint in a transaction of its own with
// river.ResumableSetStepTx before the next step starts: River's durable
// step. (Without ResumableSetStepTx, River records a resumable job's
// progress only when the attempt ends, so a crash mid-job loses it.)
type riverWorker[TTx any] struct {
	river.WorkerDefaults[riverArgs]
	// inTx runs fn in a transaction and commits it.
	inTx func(ctx context.Context, fn func(tx TTx) error) error
	// setStep is river.ResumableSetStepTx for the driver.
	setStep func(ctx context.Context, tx TTx, job *river.Job[riverArgs]) error
}

// Work implements river.Worker.
func (w *riverWorker[TTx]) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	for i := 0; i < workload.StepsPerRun; i++ {
		river.ResumableStep(ctx, workload.StepName(i), nil, func(ctx context.Context) error {
			return w.inTx(ctx, func(tx TTx) error { return w.setStep(ctx, tx, job) })
		})
	}
	return nil
}

// runRiver measures River on PostgreSQL (riverpgxv5) or SQLite
// (riversqlite): one client with c workers on the default queue, c
// producers calling Insert while it runs; a run ends with its job's
// JobCompleted event (sent once the completion is stored).
func runRiver(ctx context.Context, rc workload.RunConfig) (workload.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	switch rc.Store {
	case workload.StorePG:
		schema := workload.NewName("sbs_river")
		defer func() { _ = workload.DropSchema(ctx, rc.PGURL, schema) }()
		if err := workload.PGExec(ctx, rc.PGURL, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return workload.Result{}, err
		}
		pc, err := pgxpool.ParseConfig(rc.PGURL)
		if err != nil {
			return workload.Result{}, err
		}
		if rc.PGConns > 0 {
			pc.MaxConns = int32(rc.PGConns)
		}
		pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return workload.Result{}, err
		}
		defer pool.Close()
		w := &riverWorker[pgx.Tx]{
			inTx: func(ctx context.Context, fn func(tx pgx.Tx) error) error {
				return pgx.BeginFunc(ctx, pool, fn)
			},
			setStep: func(ctx context.Context, tx pgx.Tx, job *river.Job[riverArgs]) error {
				_, err := river.ResumableSetStepTx[*riverpgxv5.Driver](ctx, tx, job)
				return err
			},
		}
		prefix := pgx.Identifier{schema}.Sanitize() + "."
		check := func(query string, args ...any) (int64, error) {
			return workload.PGCount(ctx, rc.PGURL, strings.ReplaceAll(query, "{schema}", prefix), args...)
		}
		return riverMeasure(ctx, rc, riverpgxv5.New(pool), schema, w, check,
			`SELECT count(*) FROM {schema}river_job WHERE state = 'completed' AND metadata->>'river:resumable_step' = $1`)
	case workload.StoreSQLite:
		path := filepath.Join(rc.Dir, "river.db")
		db, err := sql.Open("sqlite", workload.SQLiteDSN(path, rc.Sync))
		if err != nil {
			return workload.Result{}, err
		}
		// riversqlite's advice: one connection, or SQLITE_BUSY errors.
		db.SetMaxOpenConns(1)
		defer db.Close()
		w := &riverWorker[*sql.Tx]{
			inTx: func(ctx context.Context, fn func(tx *sql.Tx) error) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := fn(tx); err != nil {
					_ = tx.Rollback()
					return err
				}
				return tx.Commit()
			},
			setStep: func(ctx context.Context, tx *sql.Tx, job *river.Job[riverArgs]) error {
				_, err := river.ResumableSetStepTx[*riversqlite.Driver](ctx, tx, job)
				return err
			},
		}
		check := func(query string, args ...any) (int64, error) {
			return workload.SQLiteCount(ctx, path, query, args...)
		}
		return riverMeasure(ctx, rc, riversqlite.New(db), "", w, check,
			`SELECT count(*) FROM river_job WHERE state = 'completed' AND json_extract(metadata, '$."river:resumable_step"') = ?`)
	}
	return workload.Result{}, fmt.Errorf("unknown store %q", rc.Store)
}

// riverMeasure migrates, starts a client with worker w and measures.
func riverMeasure[TTx any](ctx context.Context, rc workload.RunConfig, driver riverdriver.Driver[TTx], schema string,
	w *riverWorker[TTx], check func(query string, args ...any) (int64, error), checkQuery string) (workload.Result, error) {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: workload.DiscardLogger})
	if err != nil {
		return workload.Result{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return workload.Result{}, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown: rc.RiverFetchCooldown,
		Logger:        workload.DiscardLogger,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: rc.Concurrency}},
		Schema:        schema,
		Workers:       workers,
	})
	if err != nil {
		return workload.Result{}, err
	}
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
		ChanSize: rc.Runs + 16,
	})
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		return workload.Result{}, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = client.Stop(sctx)
		}
	}
	defer stop()

	prodErr := make(chan error, 1)
	start := time.Now()
	go func() {
		prodErr <- workload.Produce(ctx, rc.Concurrency, rc.Runs, func(ctx context.Context, i int) error {
			_, err := client.Insert(ctx, riverArgs{N: i}, nil)
			return err
		})
	}()
	enqueued := prodErr // nil once every run is enqueued: a nil channel is never ready
	for n := 0; n < rc.Runs; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return workload.Result{}, fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			n++
		case err := <-enqueued:
			if err != nil {
				return workload.Result{}, err
			}
			enqueued = nil
		case <-ctx.Done():
			return workload.Result{}, fmt.Errorf("%d of %d runs finished: %w", n, rc.Runs, ctx.Err())
		}
	}
	elapsed := time.Since(start)
	if enqueued != nil {
		if err := <-enqueued; err != nil {
			return workload.Result{}, err
		}
	}
	stop()

	// Every job completed with its last step's checkpoint stored.
	done, err := check(checkQuery, workload.StepName(workload.StepsPerRun-1))
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	if err := workload.CheckCount("completed river_job rows whose resumable step is the last", done, int64(rc.Runs)); err != nil {
		return workload.Result{}, err
	}
	return workload.Result{Elapsed: elapsed, Steps: rc.Runs * workload.StepsPerRun,
		Checked: fmt.Sprintf("%d completed jobs with river:resumable_step = %s", done, workload.StepName(workload.StepsPerRun-1))}, nil
}
