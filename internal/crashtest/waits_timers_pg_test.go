package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestTimersSurviveEveryProcessDownPostgres is the PostgreSQL variant of
// TestTimersSurviveEveryProcessDown (issue 5, Acceptance): 1,000 runs wait
// on timers 5–10 s away; two workers (--maintenance=false: runners only) park
// them; once the database shows all of them parked, both workers are
// SIGKILLed; after the last deadline, `starflow server` (whose timer
// poller fires every overdue timer in its first pass) and a new worker
// start. Every run wakes once and succeeds with its own output.
func TestTimersSurviveEveryProcessDownPostgres(t *testing.T) {
	t.Parallel()
	const n = 1000
	c := newCluster(t, 8)
	c.apply("timers", timerWorkflow)
	w1 := c.startWorker("w1", "--concurrency", "32", "--poll-interval", "100ms")
	w2 := c.startWorker("w2", "--concurrency", "32", "--poll-interval", "100ms")
	start := time.Now()
	var last time.Time
	for i := range n {
		wakeAt := time.Now().Add(5*time.Second + rand.N(5*time.Second)).UTC()
		if wakeAt.After(last) {
			last = wakeAt
		}
		if _, err := c.engine.Enqueue(context.Background(), "timers", map[string]any{"n": i, "wake_at": wakeAt.Format(time.RFC3339Nano)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 90*time.Second, fmt.Sprintf("%d runs parked", n), func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE claim_state = 'parked' AND status = 'paused' AND leased_by IS NULL`) == n
	})
	t.Logf("%d runs parked %s after the first enqueue", n, time.Since(start).Round(time.Millisecond))
	if woken := c.count(`SELECT count(*) FROM workflow_run_events WHERE event_type = 'wake_received'`); woken != 0 {
		t.Fatalf("%d wakes before any maintenance ran", woken)
	}
	w1.kill(t)
	w2.kill(t)
	killedAt := c.dbNow()
	if wait := time.Until(last) + 200*time.Millisecond; wait > 0 {
		time.Sleep(wait)
	}
	if pending := c.count(`SELECT count(*) FROM workflow_waits WHERE status = 'pending'`); pending != n {
		t.Fatalf("%d waits pending after the deadlines passed with no process, want %d", pending, n)
	}
	restart := time.Now()
	c.startServer()
	c.startWorker("w3", "--concurrency", "32", "--poll-interval", "100ms")
	c.waitAllSucceeded(n, 120*time.Second)
	t.Logf("all %d succeeded %s after the restart", n, time.Since(restart).Round(time.Millisecond))

	bad := c.count(`
		SELECT count(*) FROM workflow_runs r
		 WHERE (SELECT count(*) FROM workflow_run_events e WHERE e.run_id = r.id AND e.event_type = 'wake_received') <> 1
		    OR (SELECT count(*) FROM workflow_run_events e WHERE e.run_id = r.id AND e.event_type = 'node_complete' AND e.node_id = 'sleep') <> 1
		    OR r.output_json::text <> (r.input_json->'n')::text`)
	if bad != 0 {
		t.Fatalf("%d runs not woken exactly once or with the wrong output", bad)
	}
	if early := c.count(`SELECT count(*) FROM workflow_waits WHERE status <> 'woken' OR consumed_at < $1`, killedAt); early != 0 {
		t.Fatalf("%d waits not woken, or woken before every process was killed", early)
	}
}
