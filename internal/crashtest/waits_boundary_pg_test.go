package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCrashAtWaitCommitBoundariesPostgres is the PostgreSQL variant of
// TestCrashAtWaitCommitBoundaries: the same points (postgres.<Op>.before_commit
// inside the transactions, engine.wait.* between them), a `starflow
// worker` held there, a signal sent with the CLI (before the kill between
// transactions, after it inside one, where the paused transaction holds
// the run's row lock), SIGKILL, then `starflow server` (sweep) and a new
// worker finish the run.
func TestCrashAtWaitCommitBoundariesPostgres(t *testing.T) {
	t.Parallel()
	for _, bp := range boundaryPoints {
		point := strings.Replace(bp.point, "sqlite.", "postgres.", 1)
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, 4)
			rec := newNotifyRecorder(t, c.store)
			c.apply("boundary", fmt.Sprintf(boundaryWorkflow, rec.srv.URL))
			run, err := c.engine.Enqueue(context.Background(), "boundary", map[string]any{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			id := run.ID
			worker := c.start("w1", []string{"STARFLOW_FAULTPOINT=" + point},
				"worker", "--store", c.storeURL, "--lease-ttl", "2s", "--heartbeat", "500ms", "--poll-interval", "100ms")
			worker.waitStarted(t, "worker")
			waitFor(t, 60*time.Second, "faultpoint "+point, func() bool {
				if !worker.running() {
					t.Fatalf("worker exited before the fault point:\n%s", worker.log.String())
				}
				return strings.Contains(worker.log.String(), "faultpoint "+point+" reached")
			})
			signal := func() string {
				return string(c.cli("signal", id, "go", "--payload", `{"approved": true, "point": "`+point+`"}`))
			}
			var out string
			if bp.inTxn {
				worker.kill(t)
				out = signal()
			} else {
				out = signal()
				worker.kill(t)
			}
			if want := map[bool]string{true: "woke wait", false: "held in the wake inbox"}[bp.woke]; !strings.Contains(out, want) {
				t.Errorf("starflow signal at %s said %q, want %q", point, strings.TrimSpace(out), want)
			}
			c.startSweeper()
			c.startWorker("w2", "--lease-ttl", "2s", "--heartbeat", "500ms", "--poll-interval", "100ms")
			var status string
			var attempt int
			waitFor(t, 90*time.Second, "the run to end", func() bool {
				status, _, attempt = c.runStatus(id)
				return status == "succeeded" || status == "failed" || status == "cancelled"
			})
			if status != "succeeded" {
				t.Fatalf("run after the crash at %s: %s (attempt %d)", point, status, attempt)
			}
			var output []byte
			if err := c.pool().QueryRow(context.Background(), `SELECT output_json FROM workflow_runs WHERE id = $1`, id).Scan(&output); err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(output, &got); err != nil || got["point"] != point || got["approved"] != true {
				t.Errorf("output %s, want the signal's payload", output)
			}
			final := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'wake_received' AND attempt = $2`, id, attempt)
			all := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'wake_received'`, id)
			if final != 1 || all > attempt {
				t.Errorf("%d wake_received events in the final attempt %d (want 1), %d in all", final, attempt, all)
			}
			if n := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'node_complete' AND node_id = 'approve'`, id); n != 1 {
				t.Errorf("wait step completed %d times, want 1", n)
			}
			if n := c.count(`SELECT count(*) FROM workflow_wake_inbox WHERE consumed_at IS NULL`); n != 0 {
				t.Errorf("%d inbox rows never consumed", n)
			}
			if n := c.count(`SELECT count(*) FROM workflow_waits WHERE run_id = $1 AND status = 'pending'`, id); n != 0 {
				t.Errorf("%d waits still pending after the run succeeded", n)
			}
			rec.check(t)
		})
	}
}
