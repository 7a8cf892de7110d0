package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS's SQLite support (modernc.org/sqlite, pure Go)
	"github.com/jackc/pgx/v5"
	"github.com/starflow/starflow/bench/internal/workload"
)

// dbosNoop is one DBOS step: it does nothing; RunAsStep records its
// output in operation_outputs before the workflow goes on.
func dbosNoop(context.Context) (int, error) { return 1, nil }

// dbosWorkflow runs workload.StepsPerRun steps with RunAsStep.
func dbosWorkflow(ctx dbos.Context, n int) (int, error) {
	for i := 0; i < workload.StepsPerRun; i++ {
		if _, err := dbos.RunAsStep(ctx, dbosNoop, dbos.WithStepName(workload.StepName(i))); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// runDBOS measures DBOS Transact in direct mode: c producers each call
// RunWorkflow and wait for the workload.Result before starting the next (so c
// workflows are in flight, each executing in the producer's process).
//
// PostgreSQL: the system database is rc.PGURL with a schema of its own
// (DatabaseSchema), pool_max_conns = rc.PGConns (DBOS's default is 20).
// SQLite: at NORMAL, DBOS's own default (it opens the file with WAL,
// synchronous=NORMAL, busy_timeout 5 s, 8 connections); at FULL, a handle
// the harness opens with the same settings but synchronous=FULL, passed as
// Config.SQLiteSystemDB.
func runDBOS(ctx context.Context, rc workload.RunConfig) (res workload.Result, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := dbos.Config{AppName: "sbs-bench", Logger: workload.DiscardLogger}
	var check func(query string) (int64, error)
	switch rc.Store {
	case workload.StorePG:
		schema := workload.NewName("sbs_dbos")
		defer func() { _ = workload.DropSchema(ctx, rc.PGURL, schema) }()
		if cfg.DatabaseURL, err = workload.WithPoolSize(rc.PGURL, rc.PGConns); err != nil {
			return workload.Result{}, err
		}
		cfg.DatabaseSchema = schema
		prefix := pgx.Identifier{schema}.Sanitize() + "."
		check = func(query string) (int64, error) {
			return workload.PGCount(ctx, rc.PGURL, strings.ReplaceAll(query, "{schema}", prefix))
		}
	case workload.StoreSQLite:
		path := filepath.Join(rc.Dir, "dbos.db")
		switch rc.Sync {
		case workload.SyncNormal:
			cfg.DatabaseURL = "sqlite:" + path
		case workload.SyncFull:
			db, err := sql.Open("sqlite", workload.SQLiteDSN(path, workload.SyncFull)+"&_txlock=immediate")
			if err != nil {
				return workload.Result{}, err
			}
			db.SetMaxOpenConns(8)
			db.SetMaxIdleConns(4)
			defer db.Close()
			var level int
			if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil || level != 2 {
				return workload.Result{}, fmt.Errorf("DBOS's SQLite handle: PRAGMA synchronous = %d (%v), want 2 (FULL)", level, err)
			}
			cfg.SQLiteSystemDB = db
		default:
			return workload.Result{}, fmt.Errorf("DBOS on SQLite: unknown synchronous level %q", rc.Sync)
		}
		check = func(query string) (int64, error) {
			return workload.SQLiteCount(ctx, path, strings.ReplaceAll(query, "{schema}", ""))
		}
	default:
		return workload.Result{}, fmt.Errorf("unknown store %q", rc.Store)
	}

	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		return workload.Result{}, err
	}
	shut := false
	shutdown := func() {
		if !shut {
			shut = true
			_ = dbos.Shutdown(dctx, 10*time.Second)
		}
	}
	defer shutdown()
	dbos.RegisterWorkflow(dctx, dbosWorkflow)
	if err := dbos.Launch(dctx); err != nil {
		return workload.Result{}, err
	}

	start := time.Now()
	err = workload.Produce(ctx, rc.Concurrency, rc.Runs, func(ctx context.Context, i int) error {
		h, err := dbos.RunWorkflow(dctx, dbosWorkflow, i)
		if err != nil {
			return err
		}
		got, err := h.GetResult()
		if err != nil {
			return err
		}
		if got != i {
			return fmt.Errorf("workflow %s returned %d, want %d", h.GetWorkflowID(), got, i)
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return workload.Result{}, err
	}
	shutdown()

	want := int64(rc.Runs * workload.StepsPerRun)
	steps, err := check(`SELECT count(*) FROM {schema}operation_outputs`)
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	if err := workload.CheckCount("operation_outputs rows", steps, want); err != nil {
		return workload.Result{}, err
	}
	wfs, err := check(`SELECT count(*) FROM {schema}workflow_status WHERE status = 'SUCCESS'`)
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	if err := workload.CheckCount("SUCCESS workflow_status rows", wfs, int64(rc.Runs)); err != nil {
		return workload.Result{}, err
	}
	return workload.Result{Elapsed: elapsed, Steps: rc.Runs * workload.StepsPerRun,
		Checked: fmt.Sprintf("%d operation_outputs rows, %d SUCCESS workflows", steps, wfs)}, nil
}
