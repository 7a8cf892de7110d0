package crashtest

import (
	"context"
	"sync"
	"testing"

	"github.com/starflow/starflow"
)

// TestConcurrentIdempotentEnqueue: 64 goroutines call Engine.Enqueue at
// once with one idempotency key on PostgreSQL (through the public API, on
// a pool large enough for the calls to race in the database). Every call
// succeeds and returns the same run, and exactly one run, one receipt and
// one run_queued event exist.
func TestConcurrentIdempotentEnqueue(t *testing.T) {
	t.Parallel()
	const callers = 64
	c := newCluster(t, callers/2)
	ctx := context.Background()
	if _, err := c.engine.Apply(ctx, "once.yaml", []byte("name: once\nsteps:\n  - id: a\n    context_set: {x: 1}\n")); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			run, err := c.engine.Enqueue(ctx, "once", map[string]any{"caller": i}, &starflow.EnqueueOptions{IdempotencyKey: "the-one-key"})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = run.ID
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	distinct := map[string]int{}
	for _, id := range ids {
		distinct[id]++
	}
	if len(distinct) != 1 {
		t.Errorf("the %d callers got %d different runs: %v", callers, len(distinct), distinct)
	}
	if n := c.count(`SELECT count(*) FROM workflow_runs`); n != 1 {
		t.Errorf("%d runs exist, want 1", n)
	}
	if n := c.count(`SELECT count(*) FROM workflow_runs WHERE id = $1 AND idempotency_key = 'the-one-key'`, ids[0]); n != 1 {
		t.Errorf("the run returned (%s) is not the one stored with the key", ids[0])
	}
	if n := c.count(`SELECT count(*) FROM idempotency_receipts`); n != 1 {
		t.Errorf("%d idempotency receipts exist, want 1", n)
	}
	if n := c.count(`SELECT count(*) FROM workflow_run_events WHERE event_type = 'run_queued'`); n != 1 {
		t.Errorf("%d run_queued events exist, want 1", n)
	}
}
