package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/monoprocess"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/google/uuid"
	"github.com/starflow/starflow/bench/internal/workload"
)

// gowfNoop is one go-workflows activity: it does nothing; its scheduling
// and its workload.Result are recorded in the instance's history.
func gowfNoop(_ context.Context, i int) (int, error) { return i, nil }

// gowfWorkflow runs workload.StepsPerRun activities one after the other.
func gowfWorkflow(ctx workflow.Context, n int) (int, error) {
	for i := 0; i < workload.StepsPerRun; i++ {
		if _, err := workflow.ExecuteActivity[int](ctx, workflow.DefaultActivityOptions, gowfNoop, i).Get(ctx); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// finishedBackend reports each workflow instance whose finishing workflow
// task was committed: the moment a run ends, without polling.
type finishedBackend struct {
	backend.Backend
	finished chan struct{}
}

// CompleteWorkflowTask implements backend.Backend.
func (b *finishedBackend) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executed, activities, timers []*history.Event, events []*history.WorkflowEvent) error {
	err := b.Backend.CompleteWorkflowTask(ctx, task, state, executed, activities, timers, events)
	if err == nil && state == core.WorkflowInstanceStateFinished && task.WorkflowInstanceState != state {
		b.finished <- struct{}{}
	}
	return err
}

// newGowfBackend opens go-workflows' SQLite backend, which panics on
// errors.
func newGowfBackend(path string) (b backend.Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-workflows sqlite backend: %v", r)
		}
	}()
	return sqlite.NewSqliteBackend(path, sqlite.WithBackendOptions(backend.WithLogger(workload.DiscardLogger))), nil
}

// gowfPath is the argument of sqlite.NewSqliteBackend for a level: the
// backend opens "file:" + it and sets only journal_mode=WAL and
// busy_timeout, so FULL (SQLite's default) is its default, and NORMAL is
// asked for with modernc.org/sqlite's _pragma parameter.
func gowfPath(path, sync string) string {
	if sync == workload.SyncNormal {
		return path + "?_pragma=synchronous(NORMAL)"
	}
	return path
}

// runGoWorkflows measures go-workflows on its SQLite backend (wrapped in
// its monoprocess backend, the form its own benchmark uses when worker and
// client share a process): one worker with c parallel workflow tasks and
// c parallel activity tasks, c producers calling CreateWorkflowInstance.
func runGoWorkflows(ctx context.Context, rc workload.RunConfig) (workload.Result, error) {
	if rc.Store != workload.StoreSQLite {
		return workload.Result{}, fmt.Errorf("go-workflows v1.2.0 has no PostgreSQL backend")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	path := filepath.Join(rc.Dir, "gowf.db")
	inner, err := newGowfBackend(gowfPath(path, rc.Sync))
	if err != nil {
		return workload.Result{}, err
	}
	defer inner.Close()
	b := &finishedBackend{Backend: monoprocess.NewMonoprocessBackend(inner), finished: make(chan struct{}, rc.Runs)}

	opts := worker.DefaultOptions
	opts.MaxParallelWorkflowTasks = rc.Concurrency
	opts.MaxParallelActivityTasks = rc.Concurrency
	w := worker.New(b, &opts)
	if err := w.RegisterWorkflow(gowfWorkflow); err != nil {
		return workload.Result{}, err
	}
	if err := w.RegisterActivity(gowfNoop); err != nil {
		return workload.Result{}, err
	}
	wctx, stopWorker := context.WithCancel(ctx)
	if err := w.Start(wctx); err != nil {
		stopWorker()
		return workload.Result{}, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopWorker()
			_ = w.WaitForCompletion()
		}
	}
	defer stop()
	c := client.New(b)

	instances := make([]*workflow.Instance, rc.Runs)
	prodErr := make(chan error, 1)
	start := time.Now()
	go func() {
		prodErr <- workload.Produce(ctx, rc.Concurrency, rc.Runs, func(ctx context.Context, i int) error {
			inst, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: uuid.NewString()}, gowfWorkflow, i)
			instances[i] = inst
			return err
		})
	}()
	enqueued := prodErr // nil once every run is enqueued: a nil channel is never ready
	for n := 0; n < rc.Runs; {
		select {
		case <-b.finished:
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
	for i, inst := range instances {
		got, err := client.GetWorkflowResult[int](ctx, c, inst, time.Second)
		if err != nil {
			return workload.Result{}, fmt.Errorf("workflow %s: %w", inst.InstanceID, err)
		}
		if got != i {
			return workload.Result{}, fmt.Errorf("workflow %s returned %d, want %d", inst.InstanceID, got, i)
		}
	}
	stop()

	done, err := workload.SQLiteCount(ctx, path, `SELECT count(*) FROM history WHERE event_type = ?`, int(history.EventType_ActivityCompleted))
	if err != nil {
		return workload.Result{}, fmt.Errorf("durability check: %w", err)
	}
	want := int64(rc.Runs * workload.StepsPerRun)
	if err := workload.CheckCount("ActivityCompleted history events", done, want); err != nil {
		return workload.Result{}, err
	}
	return workload.Result{Elapsed: elapsed, Steps: rc.Runs * workload.StepsPerRun,
		Checked: fmt.Sprintf("%d ActivityCompleted history events", done)}, nil
}
