package storecore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// gateDialect is a single-writer dialect whose commits wait for a gate,
// so a test decides when a batch ends; its transactions run no queries
// but the savepoints, which it records.
type gateDialect struct {
	multi    bool  // takes several writers (Config.Pipelines applies)
	beginErr error // what Begin fails with after the first transaction
	gate     chan struct{}
	mu       sync.Mutex
	execs    []string
	begins   int
}

func (d *gateDialect) Name() string                                 { return "gate" }
func (d *gateDialect) Queries() map[string]string                   { return nil }
func (d *gateDialect) Reader() Conn                                 { return nil }
func (d *gateDialect) SingleWriter() bool                           { return !d.multi }
func (d *gateDialect) Arg(v any) any                                { return v }
func (d *gateDialect) TimeHolder() (any, func() time.Time)          { return nil, nil }
func (d *gateDialect) TimePrecision() time.Duration                 { return time.Microsecond }
func (d *gateDialect) Translate(err error) error                    { return err }
func (d *gateDialect) Retryable(error) bool                         { return false }
func (d *gateDialect) Notify(context.Context, Conn, []string) error { return nil }
func (d *gateDialect) Lock(context.Context, Conn, string) error     { return nil }
func (d *gateDialect) Close() error                                 { return nil }
func (d *gateDialect) Begin(context.Context, TxOptions) (Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.begins++
	if d.beginErr != nil && d.begins > 1 {
		return nil, d.beginErr
	}
	return gateTx{d}, nil
}

type gateTx struct{ d *gateDialect }

func (t gateTx) Exec(_ context.Context, sql string, _ ...any) (int64, error) {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.d.execs = append(t.d.execs, sql)
	return 0, nil
}
func (t gateTx) QueryRow(context.Context, string, ...any) Row        { panic("no queries") }
func (t gateTx) Query(context.Context, string, ...any) (Rows, error) { panic("no queries") }
func (t gateTx) Commit(context.Context) error                        { <-t.d.gate; return nil }
func (t gateTx) Rollback(context.Context) error                      { return nil }

// TestGroupCommitBatches: writes queued while a commit runs are committed
// together in the next transaction, each in a savepoint, and one that
// fails rolls back alone; a lone write waits for no one.
func TestGroupCommitBatches(t *testing.T) {
	d := &gateDialect{gate: make(chan struct{})}
	s := New(d, Config{})
	defer s.Close()
	write := func(fail bool) error {
		_, err := s.write(context.Background(), state.OpNodeComplete, "", false, func(*txn) error {
			if fail {
				return starflowtype.ErrLeaseLost
			}
			return nil
		})
		return err
	}
	first := make(chan error, 1)
	go func() { first <- write(false) }()
	// The first write is alone: its commit waits at the gate.
	waitFor(t, func() bool { b, _ := s.GroupCommitStats(); return b == 1 })
	const n = 10
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- write(i == 3) }()
	}
	waitFor(t, func() bool {
		s.commit.mu.Lock()
		defer s.commit.mu.Unlock()
		return len(s.commit.queue) == n
	})
	d.gate <- struct{}{} // the first commit ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	d.gate <- struct{}{} // the batch of n commits
	failed := 0
	for range n {
		if err := <-errs; errors.Is(err, starflowtype.ErrLeaseLost) {
			failed++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d writes failed, want the one that failed", failed)
	}
	batches, writes := s.GroupCommitStats()
	if batches != 2 || writes != n+1 {
		t.Fatalf("GroupCommitStats = %d batches, %d writes; want 2 and %d", batches, writes, n+1)
	}
	// The histograms: a batch of 1 and one of n (bucket le=16), and two
	// positive durations.
	m := s.CommitMetrics()
	if bw := m.BatchWrites; bw.Count != 2 || bw.Sum != n+1 || bw.Cumulative[0] != 1 || bw.Cumulative[3] != 1 || bw.Cumulative[4] != 2 {
		t.Fatalf("CommitMetrics().BatchWrites = %+v; want a batch of 1 and one of %d (bounds %v)", bw, n, bw.Bounds)
	}
	if cs := m.CommitSeconds; cs.Count != 2 || cs.Sum <= 0 || cs.Cumulative[len(cs.Cumulative)-1] > 2 {
		t.Fatalf("CommitMetrics().CommitSeconds = %+v; want two positive durations", cs)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var sp, rel, back int
	for _, e := range d.execs {
		switch e {
		case "SAVEPOINT write":
			sp++
		case "RELEASE SAVEPOINT write":
			rel++
		case "ROLLBACK TO SAVEPOINT write":
			back++
		}
	}
	// The lone write needs no savepoint; each of the batch's has one, the
	// failed one rolled back (and released).
	if sp != n || rel != n || back != 1 || d.begins != 2 {
		t.Fatalf("savepoints %d, releases %d, rollbacks %d, transactions %d; want %d, %d, 1, 2", sp, rel, back, d.begins, n, n)
	}
}

// TestGroupCommitDropsCancelled: a write whose caller gave up while it was
// still queued is never written.
func TestGroupCommitDropsCancelled(t *testing.T) {
	d := &gateDialect{gate: make(chan struct{})}
	s := New(d, Config{})
	defer s.Close()
	go func() {
		_, _ = s.write(context.Background(), state.OpNodeComplete, "", false, func(*txn) error { return nil })
	}()
	waitFor(t, func() bool { b, _ := s.GroupCommitStats(); return b == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	done := make(chan error)
	go func() {
		_, err := s.write(ctx, state.OpNodeComplete, "", false, func(*txn) error { ran = true; return nil })
		done <- err
	}()
	waitFor(t, func() bool {
		s.commit.mu.Lock()
		defer s.commit.mu.Unlock()
		return len(s.commit.queue) == 1
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v, want context.Canceled", err)
	}
	d.gate <- struct{}{}
	waitFor(t, func() bool {
		s.commit.mu.Lock()
		defer s.commit.mu.Unlock()
		return len(s.commit.queue) == 0
	})
	if _, writes := s.GroupCommitStats(); ran || writes != 1 {
		t.Fatalf("the dropped write ran (%v) or was counted (%d writes)", ran, writes)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitPipelines: on a dialect that takes several writers, up
// to Config.Pipelines batches are in flight at once, each taking what was
// queued when it started.
func TestGroupCommitPipelines(t *testing.T) {
	d := &gateDialect{multi: true, gate: make(chan struct{})}
	s := &Store{d: d, cfg: Config{Pipelines: 2}.WithDefaults()}
	s.commit = newCommitter(s)
	defer s.commit.stop()
	defer close(d.gate) // first (defers run last in, first out): nothing stays held
	write := func() error {
		_, err := s.commit.do(context.Background(), &job{op: state.OpNodeComplete, fn: func(*txn) error { return nil }})
		return err
	}
	errs := make(chan error, 6)
	// Two batches run at once, both held at the gate.
	for i := range 2 {
		go func() { errs <- write() }()
		waitFor(t, func() bool { b, _ := s.GroupCommitStats(); return b == int64(i+1) })
	}
	for range 4 {
		go func() { errs <- write() }()
	}
	waitFor(t, func() bool {
		s.commit.mu.Lock()
		defer s.commit.mu.Unlock()
		return len(s.commit.queue) == 4
	})
	if b, _ := s.GroupCommitStats(); b != 2 {
		t.Fatalf("%d batches started with both pipelines busy, want 2", b)
	}
	for range 3 {
		d.gate <- struct{}{}
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if b, w := s.GroupCommitStats(); b != 3 || w != 6 {
		t.Fatalf("GroupCommitStats = %d batches, %d writes; want 3 and 6 (the 4 queued ones together)", b, w)
	}
}

// TestGroupCommitBeginFails: a batch whose transaction cannot begin fails
// every one of its writes with that error at once; none is tried again
// alone (a database locked by another process must not cost one timeout
// per write).
func TestGroupCommitBeginFails(t *testing.T) {
	locked := errors.New("database is locked")
	d := &gateDialect{gate: make(chan struct{}), beginErr: locked}
	s := New(d, Config{})
	defer s.Close()
	defer close(d.gate)
	write := func() error {
		_, err := s.write(context.Background(), state.OpNodeComplete, "", false, func(*txn) error { return nil })
		return err
	}
	first := make(chan error, 1)
	go func() { first <- write() }()
	waitFor(t, func() bool { b, _ := s.GroupCommitStats(); return b == 1 })
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() { errs <- write() }()
	}
	waitFor(t, func() bool {
		s.commit.mu.Lock()
		defer s.commit.mu.Unlock()
		return len(s.commit.queue) == n
	})
	d.gate <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; !errors.Is(err, locked) {
			t.Fatalf("write of the failed batch: %v, want %v", err, locked)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.begins != 2 {
		t.Fatalf("%d transactions begun, want 2 (the batch's one failure, no retry per write)", d.begins)
	}
}

// TestDetachedIgnoresCancel: the statements of a batch run whatever their
// callers' contexts do (an interrupted statement rolls a whole SQLite
// transaction back).
func TestDetachedIgnoresCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var seen error
	tx := detached{ctxTx{seen: &seen}}
	_, _ = tx.Exec(ctx, "q")
	if seen != nil {
		t.Fatalf("the statement saw its context ended: %v", seen)
	}
}

// ctxTx records the context error its Exec sees.
type ctxTx struct {
	Tx
	seen *error
}

func (c ctxTx) Exec(ctx context.Context, _ string, _ ...any) (int64, error) {
	*c.seen = ctx.Err()
	return 0, nil
}
