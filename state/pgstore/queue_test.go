package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// TestIdempotentEnqueue64 starts 64 EnqueueRun calls with one key at once,
// on a pool wide enough for them to really overlap in the database: exactly
// one run and one receipt exist afterwards, and every caller got that run.
func TestIdempotentEnqueue64(t *testing.T) {
	t.Parallel()
	s := openConfig(t, pgstore.Config{Schema: newSchema(t), MaxConns: 32})
	ctx := t.Context()
	const callers = 64
	ids := make([]string, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{ID: uuid.NewString(), WorkflowName: "wf", IdempotencyKey: "burst"})
			if err == nil {
				ids[i] = r.ID
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("callers got runs %s and %s", ids[0], ids[i])
		}
	}
	var runs, receipts, events int
	err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM workflow_runs),
		(SELECT count(*) FROM idempotency_receipts), (SELECT count(*) FROM workflow_run_events)`).Scan(&runs, &receipts, &events)
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 || receipts != 1 || events != 1 {
		t.Fatalf("%d runs, %d receipts, %d events after 64 concurrent duplicates; want 1, 1, 1", runs, receipts, events)
	}
}

// TestEnqueueTx: a run enqueued in the caller's transaction exists only if
// that transaction commits; a failed EnqueueTx leaves the caller's
// transaction usable.
func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	countRuns := func() int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM workflow_runs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Rolled back: no run, no event, no receipt.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{WorkflowName: "wf", IdempotencyKey: "order-1"})
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	var inside int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM workflow_runs WHERE id = $1`, r.ID).Scan(&inside); err != nil || inside != 1 {
		t.Fatalf("run inside the caller's transaction: %d, %v; want 1", inside, err)
	}
	if _, err := s.GetRun(ctx, &state.GetRunParams{ID: r.ID}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("GetRun outside the uncommitted transaction: %v, want ErrNotFound", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRuns(); n != 0 {
		t.Fatalf("%d runs after the caller rolled back, want 0", n)
	}
	var receipts int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM idempotency_receipts`).Scan(&receipts); err != nil || receipts != 0 {
		t.Fatalf("%d receipts after the caller rolled back (%v), want 0", receipts, err)
	}

	// Committed with the caller's own write: exactly one run. A failed
	// EnqueueTx in between (a duplicate id) does not spoil the transaction.
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ('o-1')`); err != nil {
			return err
		}
		r, err = s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{WorkflowName: "wf", IdempotencyKey: "order-1"})
		if err != nil {
			return err
		}
		_, err = s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{ID: r.ID, WorkflowName: "wf"})
		if !errors.Is(err, starflowtype.ErrConflict) {
			return fmt.Errorf("EnqueueTx with a duplicate id: %v, want ErrConflict", err)
		}
		again, err := s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{WorkflowName: "wf", IdempotencyKey: "order-1"})
		if err != nil {
			return fmt.Errorf("EnqueueTx after a failed one: %w", err)
		}
		if again.ID != r.ID {
			return fmt.Errorf("repeat in the same transaction created %s, want %s", again.ID, r.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countRuns(); n != 1 {
		t.Fatalf("%d runs after the caller committed, want 1", n)
	}
	got, err := s.GetRun(ctx, &state.GetRunParams{ID: r.ID})
	if err != nil || got.Status != starflowtype.RunQueued {
		t.Fatalf("GetRun after commit: %+v, %v", got, err)
	}
	evs, err := s.ListEvents(ctx, &state.ListEventsParams{RunID: r.ID})
	if err != nil || len(evs) != 1 || evs[0].Type != starflowtype.EventRunQueued {
		t.Fatalf("events after commit: %+v, %v; want one run_queued", evs, err)
	}
}

// expireAll gives every run of s a lease by runner "frozen" that expired a
// minute ago, as if the runner died mid-run.
func expireAll(t *testing.T, s *pgstore.Store) {
	t.Helper()
	_, err := s.Pool().Exec(t.Context(), `UPDATE workflow_runs
		SET status = 'running', claim_state = 'running', leased_by = 'frozen', lease_epoch = 1,
		    claim_attempts = 1, lease_until = now() - interval '1 minute', started_at = now()`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentSweepers runs eight sweepers at once over 300 expired runs
// in small passes: every run is changed by exactly one of them, with one
// runner_lost event, and ends in the state its recovery mode and attempts
// call for.
func TestConcurrentSweepers(t *testing.T) {
	t.Parallel()
	s := openConfig(t, pgstore.Config{Schema: newSchema(t), MaxConns: 16})
	ctx := t.Context()
	const runs, sweepers = 300, 8
	want := map[string]starflowtype.ClaimState{}
	for i := range runs {
		p := &state.EnqueueRunParams{WorkflowName: "wf"}
		wantState := starflowtype.ClaimQueued
		switch i % 3 {
		case 1:
			p.RecoveryMode, wantState = starflowtype.RecoveryManual, starflowtype.ClaimAbandoned
		case 2:
			p.MaxAttempts, wantState = 1, starflowtype.ClaimFailed
		}
		r, err := s.EnqueueRun(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want[r.ID] = wantState
	}
	expireAll(t, s)

	var (
		mu      sync.Mutex
		changed = map[string]int{}
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for range sweepers {
		wg.Go(func() {
			<-start
			for {
				got, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{Limit: 7})
				if err != nil {
					t.Errorf("ExpireOldLeases: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					changed[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	// A sweeper stops when every expired run left is locked by another;
	// the others carry on, so together they leave nothing behind.
	if rest, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{}); err != nil || len(rest) != 0 {
		t.Fatalf("a final sweep changed %d runs (%v), want 0", len(rest), err)
	}
	if len(changed) != runs {
		t.Errorf("%d runs changed, want %d", len(changed), runs)
	}
	for id, n := range changed {
		if n != 1 {
			t.Errorf("run %s changed by %d sweeps, want 1", id, n)
		}
	}
	rows, err := s.Pool().Query(ctx, `SELECT r.id::text, r.claim_state,
		(SELECT count(*) FROM workflow_run_events e WHERE e.run_id = r.id AND e.event_type = 'runner_lost')
		FROM workflow_runs r`)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		ID, State string
		Lost      int
	}
	results, err := pgx.CollectRows(rows, pgx.RowToStructByPos[result])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Lost != 1 {
			t.Errorf("run %s has %d runner_lost events, want 1", r.ID, r.Lost)
		}
		if starflowtype.ClaimState(r.State) != want[r.ID] {
			t.Errorf("run %s ended %s, want %s", r.ID, r.State, want[r.ID])
		}
	}
}

// TestSweepSkipsLockedRuns: a runner frozen inside a transaction holds the
// row lock of its expired run. The sweep neither waits for it (the other
// expired run is swept at once) nor touches it; once the lock is released
// the next sweep takes it.
func TestSweepSkipsLockedRuns(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx := t.Context()
	frozen, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	expireAll(t, s)

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// What the fence of a runner write does first: lock the run's row.
	if _, err := tx.Exec(ctx, `UPDATE workflow_runs SET updated_at = now() WHERE id = $1`, frozen.ID); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	got, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{})
	if err != nil {
		t.Fatalf("ExpireOldLeases while a run is locked: %v", err)
	}
	if took := time.Since(began); took > pgstore.SweepLockTimeoutDefault {
		t.Errorf("the sweep took %v with a run locked; it must not wait for row locks", took)
	}
	if len(got) != 1 || got[0].ID != other.ID {
		t.Fatalf("sweep changed %d runs (%+v), want only the unlocked run %s", len(got), got, other.ID)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{})
	if err != nil || len(got) != 1 || got[0].ID != frozen.ID {
		t.Fatalf("sweep after the lock was released: %+v, %v; want run %s", got, err, frozen.ID)
	}
}

// TestIdleInTransactionTimeout: the server ends a session that sits idle
// inside a transaction for longer than Config.IdleInTransactionTimeout,
// releasing its row locks, as it would for a frozen runner. The default is
// 20 s.
func TestIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	def := fresh(t)
	var setting string
	if err := def.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "20s" {
		t.Errorf("idle_in_transaction_session_timeout = %s, want 20s by default", setting)
	}

	s := openConfig(t, pgstore.Config{Schema: newSchema(t), IdleInTransactionTimeout: 200 * time.Millisecond})
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive bool
		if err := def.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still alive 10 s into an idle transaction with a 200 ms timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("commit of a transaction the server ended succeeded")
	}
}

// TestSweepHook: the sweep's Change lists every run it changed, as
// written, its events and the attempts it ended; a hook's typed write
// reaches every run.
func TestSweepHook(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var (
		mu       sync.Mutex
		changes  []state.Change
		affected []int64
	)
	hook := func(ctx context.Context, tx state.HookTx, ch *state.Change) error {
		if ch.Op != state.OpExpireOldLeases {
			return nil
		}
		var n int64
		for _, r := range ch.Runs {
			if _, bumped, err := tx.BumpMirrorVersion(ctx, r.ID, "h", true); err != nil {
				return err
			} else if bumped {
				n++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, *ch)
		affected = append(affected, n)
		return nil
	}
	s := open(t, newSchema(t), []state.TxHook{hook})
	for range 3 {
		if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	// The first run's runner had a step running (and one finished) when
	// it was lost.
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "frozen", LeaseTTL: time.Hour})
	if err != nil || c == nil {
		t.Fatalf("ClaimRun = %+v, %v", c, err)
	}
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: c.ID, Lease: c.Lease()}); err != nil {
		t.Fatal(err)
	}
	done := state.StepKey{RunID: c.ID, Attempt: 1, StepID: "done"}
	cut := state.StepKey{RunID: c.ID, Attempt: 1, ScopePath: "fanout.lane_a", StepID: "cut"}
	for _, k := range []state.StepKey{done, cut} {
		if err := s.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: c.Lease(), Kind: "service_call", Try: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: done, Lease: c.Lease(), Try: 1}); err != nil {
		t.Fatal(err)
	}
	expireAll(t, s)
	got, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{})
	if err != nil || len(got) != 3 {
		t.Fatalf("ExpireOldLeases = %d runs, %v; want 3", len(got), err)
	}
	if len(changes) != 1 {
		t.Fatalf("%d sweep changes, want 1", len(changes))
	}
	ch := changes[0]
	if ch.RunID != "" || ch.Run != nil || len(ch.Runs) != 3 {
		t.Errorf("Change RunID %q Run %v Runs %d; want the runs in Runs only", ch.RunID, ch.Run, len(ch.Runs))
	}
	if affected[0] != 3 {
		t.Errorf("hook bumped %d runs, want 3", affected[0])
	}
	if len(ch.Ended) != 3 {
		t.Errorf("Change.Ended = %+v, want the 3 lost attempts", ch.Ended)
	}
	for i, r := range ch.Runs {
		stored, err := s.GetRun(ctx, &state.GetRunParams{ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != stored.Status || r.ClaimState != stored.ClaimState || r.Attempt != stored.Attempt || !r.UpdatedAt.Equal(stored.UpdatedAt) {
			t.Errorf("Change.Runs[%d] = %+v, stored %+v", i, r, stored)
		}
	}
	steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: c.ID})
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps of the lost run: %+v, %v", steps, err)
	}
	if st := steps[0]; st.Status != starflowtype.StepSucceeded {
		t.Errorf("the finished step became %s, want it left succeeded", st.Status)
	}
	if st := steps[1]; st.Status != starflowtype.StepFailed || st.Error != "runner_lost" || st.FinishedAt.IsZero() {
		t.Errorf("the step cut off by the lost runner: %+v, want failed with error runner_lost and finished_at", st)
	}
	// runner_lost and run_interrupted for each run, in run order.
	if len(ch.Events) != 6 {
		t.Fatalf("%d events in the Change, want 6", len(ch.Events))
	}
	for i, e := range ch.Events {
		want := starflowtype.EventRunnerLost
		if i%2 == 1 {
			want = starflowtype.EventRunInterrupted
		}
		if e.Type != want || e.RunID != ch.Runs[i/2].ID || e.ID == 0 {
			t.Errorf("Change.Events[%d] = %+v, want %s of run %s", i, e, want, ch.Runs[i/2].ID)
		}
	}
}
