package sqlitestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// openMigrated opens path and migrates it.
func openMigrated(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// addOutboxRows appends n step rows of run "r1" (no version: the kind
// whose order only the drain serialisation keeps).
func addOutboxRows(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.write.Exec(`INSERT INTO mirror_outbox (run_id, kind, payload, version) VALUES ('r1', 'step', ?, 1)`,
			fmt.Sprintf(`{"status":"s%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDrainLeaseTwoStores: two Stores on one file (two processes' views)
// drain at the same time; the lease in mirror_drain_lock lets one pass
// apply at a time, every row is applied exactly once, and in id order.
func TestDrainLeaseTwoStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a := openMigrated(t, path)
	b := openMigrated(t, path)
	const rows = 40
	addOutboxRows(t, a, rows)
	var (
		inFlight, maxInFlight atomic.Int32
		mu                    sync.Mutex
		order                 []int64
	)
	apply := func(ctx context.Context, batch []*state.OutboxRow) ([]int64, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(20 * time.Millisecond) // warm-store I/O
		ids := make([]int64, 0, len(batch))
		mu.Lock()
		for _, r := range batch {
			order = append(order, r.ID)
			ids = append(ids, r.ID)
		}
		mu.Unlock()
		return ids, nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := s.DrainOutbox(context.Background(), &state.DrainOutboxParams{Limit: 3}, apply); err != nil {
					errs <- err
					return
				}
				st, err := s.OutboxStats(context.Background(), &state.OutboxStatsParams{})
				if err != nil {
					errs <- err
					return
				}
				if st.Pending == 0 {
					return
				}
			}
			errs <- fmt.Errorf("rows still pending after 30 s")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := maxInFlight.Load(); m != 1 {
		t.Fatalf("%d passes applied at once across two Stores of one file; want 1", m)
	}
	if len(order) != rows {
		t.Fatalf("applied %d rows, want %d exactly once each: %v", len(order), rows, order)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("rows applied out of id order: %v", order)
		}
	}
}

// TestDrainLeaseHeldAndExpired: while another owner's unexpired lease is
// in mirror_drain_lock, a pass drains nothing; once it has expired (its
// holder died), the pass takes it and drains, and releases it after.
func TestDrainLeaseHeldAndExpired(t *testing.T) {
	s := openMigrated(t, filepath.Join(t.TempDir(), "db"))
	addOutboxRows(t, s, 2)
	all := func(_ context.Context, batch []*state.OutboxRow) ([]int64, error) {
		ids := []int64{}
		for _, r := range batch {
			ids = append(ids, r.ID)
		}
		return ids, nil
	}
	ctx := context.Background()
	if _, err := s.write.Exec(`INSERT INTO mirror_drain_lock (name, owner, until) VALUES ('outbox', 'pid 1 dead', strftime('%Y-%m-%dT%H:%M:%fZ','now','+60 seconds'))`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DrainOutbox(ctx, &state.DrainOutboxParams{}, all); n != 0 || err != nil {
		t.Fatalf("DrainOutbox while another holds the lease = %d, %v; want 0, nil", n, err)
	}
	if _, err := s.write.Exec(`UPDATE mirror_drain_lock SET until = strftime('%Y-%m-%dT%H:%M:%fZ','now','-1 seconds')`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DrainOutbox(ctx, &state.DrainOutboxParams{}, all); n != 2 || err != nil {
		t.Fatalf("DrainOutbox after the lease expired = %d, %v; want 2, nil", n, err)
	}
	var held int
	if err := s.write.QueryRow(`SELECT count(*) FROM mirror_drain_lock`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("mirror_drain_lock holds %d rows after the pass (%v); want it released", held, err)
	}
}

// TestDrainLeaseTwoProcesses: two OS processes (this test binary run
// again) drain one file at once; each logs the start and end of every
// apply to one append-only file. The log must show the passes one after
// the other (never two started) and every row applied exactly once.
func TestDrainLeaseTwoProcesses(t *testing.T) {
	if os.Getenv("SQLITESTORE_DRAIN_HELPER") != "" {
		drainHelper(t)
		return
	}
	dir := t.TempDir()
	path, logPath := filepath.Join(dir, "db"), filepath.Join(dir, "apply.log")
	s := openMigrated(t, path)
	const rows = 60
	addOutboxRows(t, s, rows)
	var procs []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDrainLeaseTwoProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SQLITESTORE_DRAIN_HELPER=1", "DRAIN_DB="+path, "DRAIN_LOG="+logPath)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		procs = append(procs, cmd)
		defer func() {
			if t.Failed() {
				t.Logf("helper output:\n%s", out.String())
			}
		}()
	}
	for _, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("drain helper: %v", err)
		}
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	pids := map[string]bool{}
	open := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch fields[0] {
		case "start":
			if open != "" {
				t.Fatalf("process %s started an apply while process %s's was running", fields[1], open)
			}
			open = fields[1]
			pids[fields[1]] = true
		case "end":
			if open != fields[1] {
				t.Fatalf("apply end of process %s, but %q was running", fields[1], open)
			}
			open = ""
			for _, id := range fields[2:] {
				seen[id]++
			}
		}
	}
	if len(seen) != rows {
		t.Fatalf("%d distinct rows applied, want %d", len(seen), rows)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %s applied %d times", id, n)
		}
	}
	t.Logf("passes came from %d process(es)", len(pids))
}

// drainHelper is the child of TestDrainLeaseTwoProcesses: drain until the
// outbox is empty, logging each apply.
func drainHelper(t *testing.T) {
	s, err := Open(Config{Path: os.Getenv("DRAIN_DB")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logf, err := os.OpenFile(os.Getenv("DRAIN_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	pid := fmt.Sprint(os.Getpid())
	apply := func(_ context.Context, batch []*state.OutboxRow) ([]int64, error) {
		if _, err := logf.WriteString("start " + pid + "\n"); err != nil {
			return nil, err
		}
		time.Sleep(15 * time.Millisecond) // warm-store I/O
		ids := make([]int64, 0, len(batch))
		line := "end " + pid
		for _, r := range batch {
			ids = append(ids, r.ID)
			line += fmt.Sprintf(" %d", r.ID)
		}
		if _, err := logf.WriteString(line + "\n"); err != nil {
			return nil, err
		}
		return ids, nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.DrainOutbox(context.Background(), &state.DrainOutboxParams{Limit: 4}, apply); err != nil {
			t.Fatal(err)
		}
		st, err := s.OutboxStats(context.Background(), &state.OutboxStatsParams{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending == 0 {
			return
		}
	}
	t.Fatal("rows still pending after 60 s")
}

// TestDrainEmptyOutboxWritesNothing: a pass over an empty outbox (every
// poll interval of every process) takes no lease: the writer connection
// changes no row.
func TestDrainEmptyOutboxWritesNothing(t *testing.T) {
	s := openMigrated(t, filepath.Join(t.TempDir(), "db"))
	changes := func() int64 {
		var n int64
		if err := s.write.QueryRow(`SELECT total_changes()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := changes()
	n, err := s.DrainOutbox(context.Background(), &state.DrainOutboxParams{}, func(context.Context, []*state.OutboxRow) ([]int64, error) {
		t.Error("apply called on an empty outbox")
		return nil, nil
	})
	if n != 0 || err != nil {
		t.Fatalf("DrainOutbox on an empty outbox = %d, %v", n, err)
	}
	if after := changes(); after != before {
		t.Fatalf("a pass over an empty outbox changed %d rows", after-before)
	}
}
