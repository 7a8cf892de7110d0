package workload

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

func TestProduceEnqueuesEveryRunOnce(t *testing.T) {
	for _, tc := range []struct{ c, runs int }{{1, 5}, {3, 10}, {16, 16}, {4, 3}} {
		var mu sync.Mutex
		seen := map[int]int{}
		err := Produce(context.Background(), tc.c, tc.runs, func(_ context.Context, i int) error {
			mu.Lock()
			seen[i]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatalf("c=%d runs=%d: %v", tc.c, tc.runs, err)
		}
		if len(seen) != tc.runs {
			t.Fatalf("c=%d runs=%d: enqueued %d distinct runs", tc.c, tc.runs, len(seen))
		}
		for i, n := range seen {
			if i < 0 || i >= tc.runs || n != 1 {
				t.Fatalf("c=%d runs=%d: run %d enqueued %d times", tc.c, tc.runs, i, n)
			}
		}
	}
}

func TestProduceReturnsTheFirstErrorAndStops(t *testing.T) {
	// Run 0 (producer 0's first) fails; every other producer's first
	// enqueue waits for the cancellation (a producer may also see it before
	// its first). No producer may start a second.
	const c = 4
	boom := errors.New("boom")
	var mu sync.Mutex
	calls := 0
	err := Produce(context.Background(), c, 1000, func(ctx context.Context, i int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		if i == 0 {
			return boom
		}
		<-ctx.Done()
		return nil // an enqueue that ignores the cancellation must not be called again either
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want an error wrapping %v", err, boom)
	}
	if calls < 1 || calls > c {
		t.Fatalf("%d enqueues, want 1 to %d (at most one per producer): producers went on after the failure", calls, c)
	}
}

func TestSQLiteDSNSetsTheLevel(t *testing.T) {
	for _, level := range []string{SyncFull, SyncNormal} {
		got, err := SQLitePragmaSynchronous(context.Background(), SQLiteDSN(filepath.Join(t.TempDir(), "x.db"), level))
		if err != nil {
			t.Fatal(err)
		}
		if got != level {
			t.Fatalf("SQLiteDSN(%s) opens at synchronous=%s", level, got)
		}
	}
}

func TestWithPoolSize(t *testing.T) {
	got, err := WithPoolSize("postgres://u@h:5432/db?sslmode=disable", 20)
	if err != nil {
		t.Fatal(err)
	}
	if got != "postgres://u@h:5432/db?pool_max_conns=20&sslmode=disable" {
		t.Fatalf("got %s", got)
	}
	if got, _ := WithPoolSize("postgres://u@h/db", 0); got != "postgres://u@h/db" {
		t.Fatalf("0 must keep the URL, got %s", got)
	}
}
