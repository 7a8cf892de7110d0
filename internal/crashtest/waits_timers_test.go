package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

const timerWorkflow = `name: timers
recovery_mode: resume
steps:
  - id: before
    context_set: {n: "${{ input.n }}"}
  - id: sleep
    wait: {until: "${{ input.wake_at }}"}
  - id: after
    context_set: {woke: true}
output: "${{ variables.n }}"
`

// TestTimersSurviveEveryProcessDown (issue 5, Acceptance): 1,000 runs
// each wait on a timer 5–10 s away (random per run). A worker — a runner
// with --maintenance=false, so no timer can fire — parks them all; once the
// database shows every run parked (no lease held), the worker is
// SIGKILLed, and nothing runs until the last deadline has passed. Then
// `starflow dev` starts: its timer poller's first pass fires every overdue
// timer, and every run wakes exactly once (one wake_received, one
// node_complete of the wait step) and succeeds with its own output.
func TestTimersSurviveEveryProcessDown(t *testing.T) {
	t.Parallel()
	const n = 1000
	d := newLiteDeploy(t)
	d.apply("timers", timerWorkflow)

	worker := d.startProc("worker", nil, "--concurrency", "32", "--poll-interval", "50ms")
	start := time.Now()
	var last time.Time
	ids := make([]string, n)
	for i := range n {
		wakeAt := time.Now().Add(5*time.Second + rand.N(5*time.Second)).UTC()
		if wakeAt.After(last) {
			last = wakeAt
		}
		ids[i] = d.enqueue("timers", map[string]any{"n": i, "wake_at": wakeAt.Format(time.RFC3339Nano)})
	}
	waitFor(t, 90*time.Second, fmt.Sprintf("%d runs parked", n), func() bool {
		return d.count(`SELECT count(*) FROM workflow_runs WHERE claim_state = 'parked' AND status = 'paused' AND leased_by IS NULL`) == n
	})
	t.Logf("%d runs parked %s after the first enqueue", n, time.Since(start).Round(time.Millisecond))
	if woken := d.count(`SELECT count(*) FROM workflow_run_events WHERE event_type = 'wake_received'`); woken != 0 {
		t.Fatalf("%d wakes before any maintenance ran (the worker runs no maintenance)", woken)
	}
	worker.kill(t)
	killedAt := time.Now()

	// Every process is down; let every deadline pass.
	if wait := time.Until(last) + 200*time.Millisecond; wait > 0 {
		time.Sleep(wait)
	}
	if pending := d.count(`SELECT count(*) FROM workflow_waits WHERE status = 'pending'`); pending != n {
		t.Fatalf("%d waits pending after the deadlines passed with no process, want %d", pending, n)
	}
	restart := time.Now()
	d.startProc("dev", nil, "--concurrency", "32", "--poll-interval", "50ms", "--sweep-interval", "5s")
	waitFor(t, 120*time.Second, fmt.Sprintf("%d runs succeeded", n), func() bool {
		return d.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) == n
	})
	t.Logf("all %d succeeded %s after the restart", n, time.Since(restart).Round(time.Millisecond))

	perRun := func(query string) map[string]int {
		rows, err := d.store.DB().Query(query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var id string
			var c int
			if err := rows.Scan(&id, &c); err != nil {
				t.Fatal(err)
			}
			m[id] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	wakes := perRun(`SELECT run_id, count(*) FROM workflow_run_events WHERE event_type = 'wake_received' GROUP BY run_id`)
	completes := perRun(`SELECT run_id, count(*) FROM workflow_run_events WHERE event_type = 'node_complete' AND node_id = 'sleep' GROUP BY run_id`)
	bad := 0
	for i, id := range ids {
		r := d.run(id)
		if wakes[id] != 1 || completes[id] != 1 || r.output != strconv.Itoa(i) {
			if bad++; bad <= 10 {
				t.Errorf("run %d (%s): %d wake_received, %d node_complete of the wait, output %s; want 1, 1, %d", i, id, wakes[id], completes[id], r.output, i)
			}
		}
	}
	// The wakes happened after the restart, by the poller: the waits were
	// consumed after every process had been killed.
	waits, err := d.store.ListWaits(context.Background(), &state.ListWaitsParams{Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != n {
		t.Fatalf("%d waits, want %d (one per run)", len(waits), n)
	}
	early := 0
	for _, w := range waits {
		if w.Status != starflowtype.WaitWoken || w.ConsumedAt.Before(killedAt.Add(-time.Second)) {
			if early++; early <= 10 {
				t.Errorf("wait %s of run %s: %s, consumed at %v; want woken after the kill at %v", w.ID, w.RunID, w.Status, w.ConsumedAt, killedAt)
			}
		}
	}
}
