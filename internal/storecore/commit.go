package storecore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Group commit (issue 11). Writes that are ready at the same moment are
// committed together: one transaction, one commit (one fsync) for many.
// The committer takes every write queued while the previous commit ran,
// so a lone write waits for nothing and a busy store commits in batches
// as large as the load makes them.
//
// Single-writer dialects (SQLite) send every write through it: each write
// runs in a savepoint of the batch's transaction, so a write that fails
// (a lost lease, a conflict, a hook's refusal) rolls back alone and the
// others commit. StepBatcher dialects (PostgreSQL) send the step writes
// through it: the batch's writes go to the server in one pipeline, each a
// statement whose writes all hang off its own fence, so a lost lease
// writes nothing for that run and the others commit; any error of the
// batch as a whole (or a hook's refusal) is resolved by committing each
// write of it alone.
//
// A write's caller learns its outcome only after the commit: a step's side
// effect is never started, and WaitRun never reports a step, before its
// own write is durable.
//
// On PostgreSQL every statement of a batch runs before any write's hooks,
// so a hook of a run with two writes in the batch (two lanes of one run)
// reads the run as the later one left it; the rows it appends carry the
// versions in write order, so the warm tier ends the same.

// job is one write waiting for the committer.
type job struct {
	ctx     context.Context
	op      state.Op
	runID   string
	readRun bool
	opts    TxOptions
	fn      func(t *txn) error
	sw      *StepWrite // a step write of a StepBatcher dialect (fn finishes it)

	state atomic.Int32 // jobQueued, jobTaken or jobDropped
	run   *starflowtype.Run
	err   error
	done  chan struct{}
}

const (
	jobQueued int32 = iota
	jobTaken
	jobDropped
)

type committer struct {
	s        *Store
	parallel int // batches at once
	// batches and writes count what the committer committed (or tried
	// to): GroupCommitStats.
	batches, writes atomic.Int64
	stats           commitStats // batch sizes and durations (state.CommitMetrics)
	mu              sync.Mutex
	queue           []*job
	wake            chan struct{}
	quit            chan struct{}
	exit            chan struct{}
	once            sync.Once
}

func newCommitter(s *Store) *committer {
	c := &committer{s: s, parallel: 1, stats: newCommitStats(), wake: make(chan struct{}, 1), quit: make(chan struct{}), exit: make(chan struct{})}
	if !s.d.SingleWriter() {
		c.parallel = s.cfg.Pipelines
	}
	go c.loop()
	return c
}

// errClosed is what a write gets after Close.
var errClosed = errors.New("storecore: the store is closed")

// do queues j and waits for its outcome. When ctx ends while j is still
// queued it is dropped (never written) and ctx's error returned; once the
// committer took it, do waits for the commit, which no caller's ctx
// interrupts (the batch holds other callers' writes too).
func (c *committer) do(ctx context.Context, j *job) (*starflowtype.Run, error) {
	j.ctx, j.done = ctx, make(chan struct{})
	c.mu.Lock()
	select {
	case <-c.quit:
		c.mu.Unlock()
		return nil, errClosed
	default:
	}
	c.queue = append(c.queue, j)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobDropped) {
			return nil, ctx.Err()
		}
		<-j.done
	}
	return j.run, j.err
}

// stop ends the loop once the queued writes are committed.
func (c *committer) stop() {
	c.once.Do(func() {
		c.mu.Lock()
		close(c.quit)
		c.mu.Unlock()
		<-c.exit
	})
}

// loop starts a batch whenever writes are queued and fewer than
// c.parallel batches are running (a single-writer dialect: one at a time,
// in this goroutine). Several batches in flight let PostgreSQL flush
// their commits together, while each batch still takes every write queued
// when it starts.
func (c *committer) loop() {
	defer close(c.exit)
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, c.parallel)
	for {
		select {
		case slots <- struct{}{}:
		case <-c.quit:
			running.Wait()
			for batch := c.take(); len(batch) > 0; batch = c.take() {
				c.run(batch)
			}
			return
		}
		batch := c.take()
		if len(batch) == 0 {
			<-slots
			select {
			case <-c.wake:
			case <-c.quit:
			}
			continue
		}
		if c.parallel == 1 {
			c.run(batch)
			<-slots
			continue
		}
		running.Add(1)
		go func() {
			defer running.Done()
			c.run(batch)
			<-slots
			select { // a slot is free: look at the queue again
			case c.wake <- struct{}{}:
			default:
			}
		}()
	}
}

// take removes up to MaxBatch queued writes, leaving out dropped ones.
func (c *committer) take() []*job {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), c.s.cfg.MaxBatch)
	var out []*job
	for _, j := range c.queue[:n] {
		if j.state.CompareAndSwap(jobQueued, jobTaken) {
			out = append(out, j)
		}
	}
	c.queue = append(c.queue[:0], c.queue[n:]...)
	return out
}

func (c *committer) run(batch []*job) {
	c.batches.Add(1)
	c.writes.Add(int64(len(batch)))
	defer func() {
		for _, j := range batch {
			close(j.done)
		}
	}()
	defer c.observe(len(batch), time.Now()) // before the writers learn their outcome
	var err error
	if batch[0].sw != nil {
		err = c.s.pipeline(batch)
	} else {
		err = c.s.savepoints(batch)
	}
	var whole errWhole
	switch {
	case err == nil:
	case errors.As(err, &whole):
		// The transaction could not even begin: no write of the batch ran,
		// and none alone would fare better.
		for _, j := range batch {
			j.run, j.err = nil, whole.error
		}
	default:
		// The batch failed because of what one of its writes did (nothing of
		// it committed): each write alone, so that the failure is its own.
		// A write whose caller has given up meanwhile is not made.
		for _, j := range batch {
			if err := j.ctx.Err(); err != nil {
				j.run, j.err = nil, err
				continue
			}
			j.run, j.err = c.s.writeAlone(context.WithoutCancel(j.ctx), j.opts, j.op, j.runID, j.readRun, j.body())
		}
	}
}

// errWhole is a batch that failed before any of its writes ran.
type errWhole struct{ error }

func (e errWhole) Unwrap() error { return e.error }

// GroupCommitStats returns how many batches the group committer ran and
// how many writes they held (0, 0 when the store has none). The mean batch
// size, writes/batches, shows how much group commit saves.
func (s *Store) GroupCommitStats() (batches, writes int64) {
	if s.commit == nil {
		return 0, 0
	}
	return s.commit.batches.Load(), s.commit.writes.Load()
}

// body is what j writes in a transaction.
func (j *job) body() func(t *txn) error {
	if j.sw == nil {
		return j.fn
	}
	return func(t *txn) error {
		if err := t.s.execStep(context.WithoutCancel(j.ctx), t.tx, j.sw); err != nil {
			return err
		}
		return j.fn(t)
	}
}

// savepoints commits batch in one transaction, each write in a savepoint.
// It returns an error only when the transaction itself failed before
// commit, having set no write's outcome.
func (s *Store) savepoints(batch []*job) error {
	ctx := context.Background()
	opts := batch[0].opts
	for _, j := range batch[1:] {
		if j.opts.LockTimeout > opts.LockTimeout {
			opts = j.opts
		}
	}
	tx, err := s.begin(ctx, opts)
	if err != nil {
		return errWhole{err}
	}
	// The writes' statements run under their callers' contexts, which may
	// end: a statement interrupted inside the transaction would roll all of
	// it back (SQLite), so the batch's statements ignore cancellation. A
	// write whose caller gave up before its turn is not made.
	tx = detached{tx}
	done := 0
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.run, j.err = nil, err
			continue
		}
		jctx := context.WithoutCancel(j.ctx)
		if len(batch) > 1 {
			if err := tx.Savepoint(ctx); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("savepoint: %w", err)
			}
		}
		j.run, j.err = s.within(jctx, tx, j.op, j.runID, j.readRun, j.body())
		switch {
		case len(batch) == 1:
		case j.err != nil:
			if err := tx.RollbackTo(ctx); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("rollback to savepoint: %w", err)
			}
		default:
			if err := tx.Release(ctx); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("release savepoint: %w", err)
			}
		}
		if j.err == nil {
			done++
		}
		if len(batch) > 1 {
			faultpoint.Hit(s.d.Name() + ".batch.after_write")
		}
	}
	if done == 0 {
		_ = tx.Rollback(ctx)
		return nil
	}
	s.commitBatch(ctx, tx, batch)
	return nil
}

// pipeline commits a batch of step writes in one transaction through the
// dialect's StepBatcher. It returns an error, having set no outcome, when
// the batch must be written again write by write: the pipeline failed, or
// a hook refused one of the writes.
func (s *Store) pipeline(batch []*job) error {
	ctx := context.Background()
	tx, err := s.begin(ctx, TxOptions{LockTimeout: s.cfg.BatchLockTimeout, ByKey: true})
	if err != nil {
		return errWhole{err}
	}
	tx = detached{tx}
	ws := make([]*StepWrite, len(batch))
	for i, j := range batch {
		ws[i] = j.sw
	}
	if err := s.batch.StepWrites(ctx, tx.Conn(), ws); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	if len(batch) > 1 {
		faultpoint.Hit(s.d.Name() + ".batch.after_pipeline")
	}
	for _, j := range batch {
		j.run, j.err = s.within(context.WithoutCancel(j.ctx), tx, j.op, j.runID, false, j.fn)
		var he hookError
		if errors.As(j.err, &he) {
			_ = tx.Rollback(ctx)
			return j.err
		}
	}
	s.commitBatch(ctx, tx, batch)
	return nil
}

// commitBatch commits a batch's transaction: every write that succeeded
// so far fails with the commit's error if the commit fails.
func (s *Store) commitBatch(ctx context.Context, tx Tx, batch []*job) {
	for _, j := range batch {
		if j.err == nil {
			faultpoint.Hit(s.d.Name() + "." + string(j.op) + ".before_commit")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		for _, j := range batch {
			if j.err == nil {
				j.run, j.err = nil, fmt.Errorf("commit: %w", err)
			}
		}
	}
}

// detached is a Tx whose statements ignore their contexts' cancellation.
type detached struct{ Tx }

func (d detached) Exec(ctx context.Context, name string, args ...any) (int64, error) {
	return d.Tx.Exec(context.WithoutCancel(ctx), name, args...)
}

func (d detached) QueryRow(ctx context.Context, name string, args ...any) Row {
	return d.Tx.QueryRow(context.WithoutCancel(ctx), name, args...)
}

func (d detached) Query(ctx context.Context, name string, args ...any) (Rows, error) {
	return d.Tx.Query(context.WithoutCancel(ctx), name, args...)
}
