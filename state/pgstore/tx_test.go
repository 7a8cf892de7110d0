package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/state/pgstore"
)

// TestTransactions: the dialect's transactions send BEGIN (and their
// settings) with their first statement, not before: one with no statement
// sends nothing; settings apply from the first statement; a failed
// statement leaves a transaction that rolls back and a connection the pool
// can use again; committing a failed transaction is an error; every
// transaction returns its connection to the pool.
func TestTransactions(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx := t.Context()
	begin := func(opts storecore.TxOptions) storecore.Conn {
		t.Helper()
		c, err := pgstore.Begin(ctx, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	setting := func(c storecore.Conn, name string) string {
		t.Helper()
		var v string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatalf("current_setting(%s): %v", name, err)
		}
		return v
	}
	idle := func(what string) {
		t.Helper()
		if n := s.Pool().Stat().AcquiredConns(); n != 0 {
			t.Errorf("%s: %d connections still acquired; want every one back in the pool", what, n)
		}
	}

	// Nothing sent: nothing to commit or roll back.
	if err := begin(storecore.TxOptions{}).Commit(ctx); err != nil {
		t.Errorf("Commit with no statement: %v", err)
	}
	if err := begin(storecore.TxOptions{}).Rollback(ctx); err != nil {
		t.Errorf("Rollback with no statement: %v", err)
	}
	idle("after empty transactions")

	// The first statement runs inside the transaction, with its settings.
	c := begin(storecore.TxOptions{LockTimeout: 1500 * time.Millisecond, ByKey: true})
	if got := setting(c, "lock_timeout"); got != "1500ms" {
		t.Errorf("lock_timeout = %q, want 1500ms", got)
	}
	if got := setting(c, "enable_seqscan"); got != "off" {
		t.Errorf("enable_seqscan with ByKey = %q, want off", got)
	}
	var began time.Time
	if err := c.QueryRow(ctx, "SELECT now()").Scan(&began); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	var later time.Time
	if err := c.QueryRow(ctx, "SELECT now()").Scan(&later); err != nil || !later.Equal(began) {
		t.Errorf("now() = %v then %v (%v): want one transaction's start time", began, later, err)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("second Commit = %v, want pgx.ErrTxClosed", err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Exec after Commit = %v, want pgx.ErrTxClosed", err)
	}
	if err := c.QueryRow(ctx, "SELECT 1").Scan(new(int)); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("QueryRow after Commit = %v, want pgx.ErrTxClosed", err)
	}
	c = begin(storecore.TxOptions{})
	if got := setting(c, "enable_seqscan"); got != "on" {
		t.Errorf("enable_seqscan without ByKey = %q, want on (a setting of an earlier transaction leaked)", got)
	}
	if err := c.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	idle("after the settings")

	// A row lock held elsewhere: the lock timeout ends the wait.
	if _, err := s.Pool().Exec(ctx, "CREATE TABLE tx_lock (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO tx_lock VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT 1 FROM tx_lock WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	c = begin(storecore.TxOptions{LockTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = c.Exec(ctx, "UPDATE tx_lock SET id = 1 WHERE id = 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" || time.Since(start) > 10*time.Second {
		t.Errorf("update of a locked row = %v after %v; want lock_not_available (55P03) after about 100ms", err, time.Since(start))
	}
	// Committing the failed transaction is refused; it is rolled back.
	if err := c.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Errorf("Commit of a failed transaction = %v, want pgx.ErrTxCommitRollback", err)
	}
	_ = holder.Rollback(ctx)

	// A failed first statement, then a rollback: the connection is clean.
	c = begin(storecore.TxOptions{})
	if _, err := c.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("SELECT 1/0 succeeded")
	}
	if err := c.Rollback(ctx); err != nil {
		t.Fatalf("Rollback after a failed statement: %v", err)
	}
	idle("after the failures")
	for range s.Pool().Stat().MaxConns() + 1 { // every connection of the pool, and one more
		c := begin(storecore.TxOptions{})
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("a transaction after the failures: %d, %v", one, err)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("its commit: %v", err)
		}
	}
	idle("at the end")
}
