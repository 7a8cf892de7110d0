package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// listener LISTENs on channel with a raw connection, to see payloads.
func listener(t *testing.T, channel string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// nextPayload waits (at most 10 s) for the next notification on conn.
func nextPayload(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("waiting for a notification: %v", err)
	}
	return n.Payload
}

// TestNotifications: enqueues and the writes that re-queue a run notify the
// store's own channel with the run's pool, when they commit; a rolled-back
// enqueue (in the caller's transaction, or refused by a hook), a
// duplicate, and another schema's store notify nothing here.
// PostgreSQL delivers notifications in commit order, so a closing
// "barrier" notification proves nothing else arrived before it.
func TestNotifications(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, other := fresh(t), fresh(t)
	if s.Channel() == other.Channel() || s.Channel() != pgstore.ChannelPrefix+"_"+s.Schema() {
		t.Fatalf("channels %q and %q: want starflow_work_<schema>, distinct per schema", s.Channel(), other.Channel())
	}
	conn := listener(t, s.Channel())

	if _, err := other.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf", RunnerPool: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{WorkflowName: "wf", RunnerPool: "rolled-back"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A write the hook refuses after its notification was queued.
	refusing := open(t, s.Schema(), []state.TxHook{func(context.Context, state.HookTx, *state.Change) error {
		return errors.New("refused")
	}})
	if _, err := refusing.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf", RunnerPool: "refused"}); err == nil {
		t.Fatal("an enqueue its hook refused succeeded")
	}
	r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf", RunnerPool: "gpu", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf", RunnerPool: "duplicate", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if got := nextPayload(t, conn); got != "gpu" {
		t.Fatalf("first notification %q, want gpu (the committed enqueue)", got)
	}

	// Re-queues: OnRunError with a retry, ClearLease, the sweep.
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", Pools: []string{"gpu"}, LeaseTTL: time.Minute})
	if err != nil || c == nil || c.ID != r.ID {
		t.Fatalf("ClaimRun = %+v, %v", c, err)
	}
	if _, err := s.OnRunError(ctx, &state.RunErrorParams{RunID: r.ID, Lease: c.Lease(), Error: "503", Retry: true}); err != nil {
		t.Fatal(err)
	}
	if got := nextPayload(t, conn); got != "gpu" {
		t.Fatalf("notification after OnRunError's re-queue %q, want gpu", got)
	}
	c, err = s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", Pools: []string{"gpu"}, LeaseTTL: -time.Second})
	if err != nil || c == nil {
		t.Fatalf("ClaimRun = %+v, %v", c, err)
	}
	if err := s.ClearLease(ctx, &state.ClearLeaseParams{RunID: r.ID, Lease: c.Lease()}); err != nil {
		t.Fatal(err)
	}
	if got := nextPayload(t, conn); got != "gpu" {
		t.Fatalf("notification after ClearLease %q, want gpu", got)
	}
	if c, err = s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", Pools: []string{"gpu"}, LeaseTTL: -time.Second}); err != nil || c == nil {
		t.Fatalf("ClaimRun = %+v, %v", c, err)
	}
	if got, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{}); err != nil || len(got) != 1 {
		t.Fatalf("ExpireOldLeases = %d runs, %v", len(got), err)
	}
	if got := nextPayload(t, conn); got != "gpu" {
		t.Fatalf("notification after the sweep's re-queue %q, want gpu", got)
	}

	if _, err := s.Pool().Exec(ctx, "SELECT pg_notify($1, 'barrier')", s.Channel()); err != nil {
		t.Fatal(err)
	}
	if got := nextPayload(t, conn); got != "barrier" {
		t.Fatalf("notification %q before the barrier; want nothing else", got)
	}
}

// TestListen: Listen calls back once connected and on every enqueue,
// reconnects when its connection is killed, and returns when its context
// ends.
func TestListen(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx, cancel := context.WithCancel(t.Context())
	calls := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func() {
			select {
			case calls <- struct{}{}:
			default:
			}
		})
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no call of onNotify %s within 10 s", what)
		}
	}
	wait("once connected")
	if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
		t.Fatal(err)
	}
	wait("after an enqueue")

	// Kill the listening backend; Listen connects again and says so.
	var killed bool
	err := s.Pool().QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+pgx.Identifier{s.Channel()}.Sanitize()).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminating the listening backend: %v, %v", killed, err)
	}
	wait("after reconnecting")
	if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
		t.Fatal(err)
	}
	wait("after an enqueue on the new connection")

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return within 10 s of its context ending")
	}
}
