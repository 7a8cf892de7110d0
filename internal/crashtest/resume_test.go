package crashtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// resumeWorkerFlags are the short tunables of the resume tests' workers.
// The tests assert how many attempts each run took, so a live worker must
// never lose a lease: a 5 s TTL refreshed every 500 ms outlasts a 4.5 s
// stall of a worker (CI runs every package under -race on two CPUs; with
// a 2 s TTL one stall there interrupted the live workers' runs of
// TestSIGKILLResumeNested a second time).
var resumeWorkerFlags = []string{"--lease-ttl", "5s", "--heartbeat", "500ms", "--poll-interval", "100ms"}

// startSweeper starts `starflow server` with a 500 ms sweep interval.
func (c *cluster) startSweeper() *process {
	c.t.Helper()
	p := c.start("server", nil, "server", "--store", c.storeURL, "--sweep-interval", "500ms", "--addr", "127.0.0.1:0")
	p.waitStarted(c.t, "server")
	return p
}

// cli runs the starflow binary with args (the store flag added) and
// returns its standard output.
func (c *cluster) cli(args ...string) []byte {
	c.t.Helper()
	cmd := exec.Command(binary, append(args, "--store", c.storeURL)...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), clusterWakeKeys)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("starflow %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// runStatus is a run's status, claim state and attempt.
func (c *cluster) runStatus(id string) (status, claim string, attempt int) {
	c.t.Helper()
	if err := c.pool().QueryRow(c.t.Context(),
		`SELECT status, claim_state, attempt FROM workflow_runs WHERE id = $1`, id).Scan(&status, &claim, &attempt); err != nil {
		c.t.Fatal(err)
	}
	return status, claim, attempt
}

// acceptedPerKey counts the accepted side effects per idempotency key.
func acceptedPerKey(effects []effect) map[string]int {
	n := map[string]int{}
	for _, e := range effects {
		if e.accepted {
			n[e.key]++
		}
	}
	return n
}

// TestSIGKILLResumeLinear (issue 4, Acceptance): a 3-step workflow of
// service_calls with recovery_mode manual; the worker is killed with
// SIGKILL while the service holds its request of the third step. The
// sweep (starflow server) interrupts the run, `starflow runs resume`
// queues attempt 2 in resume mode, and a new worker completes it: steps
// 1–2 executed exactly once (one accepted request per Idempotency-Key),
// step 3 at most twice under the same key (the cut-off execution and the
// completing one), attempt 1's ledger rows (steps 1–2 succeeded, step 3
// failed by the sweep) and checkpoints are kept, attempt 2 writes a row
// and a checkpoint for step 3 only, and the run ends in attempt 2.
func TestSIGKILLResumeLinear(t *testing.T) {
	start := time.Now()
	c := newCluster(t, 8)
	svc := newSideEffects(t, c)
	wf := sideEffectWorkflow("linear", svc.URL(), 3, nil)
	wf = strings.Replace(wf, "max_attempts: 5\n", "max_attempts: 5\nrecovery_mode: manual\n", 1)
	if !strings.Contains(wf, "recovery_mode: manual") {
		t.Fatalf("workflow without recovery_mode:\n%s", wf)
	}
	c.apply("linear", wf)

	w1 := c.startWorker("w1", resumeWorkerFlags...)
	svc.hold(w1.name, "s03")
	id := c.enqueue("linear", 1)[0]
	waitFor(t, 60*time.Second, "w1's request of s03 to reach the service", func() bool {
		return len(svc.heldRequests()) >= 1
	})
	w1.kill(t)
	// The service finishes the cut-off request after the worker died.
	svc.release()
	waitFor(t, 30*time.Second, "the cut-off request to be decided", func() bool {
		for _, r := range svc.heldRequests() {
			if !r.decided {
				return false
			}
		}
		return true
	})

	c.startSweeper()
	waitFor(t, 60*time.Second, "the sweep to interrupt the run", func() bool {
		status, claim, _ := c.runStatus(id)
		return status == "interrupted" && claim != "claimed" && claim != "running"
	})
	if status, claim, attempt := c.runStatus(id); attempt != 1 {
		t.Fatalf("after the sweep (manual): %s/%s attempt %d; want attempt 1", status, claim, attempt)
	}
	// recovery_mode manual: nothing re-queues it by itself.
	if n := c.count(`SELECT count(*) FROM workflow_runs WHERE id = $1 AND claim_state = 'queued'`, id); n != 0 {
		t.Fatalf("the sweep re-queued a run whose recovery_mode is manual")
	}

	out := c.cli("runs", "resume", id)
	if !strings.Contains(string(out), "attempt 2") {
		t.Errorf("starflow runs resume: %q does not report attempt 2", out)
	}
	c.startWorker("w2", resumeWorkerFlags...)
	c.waitAllSucceeded(1, 60*time.Second)

	if status, _, attempt := c.runStatus(id); status != "succeeded" || attempt != 2 {
		t.Errorf("run %s ended %s in attempt %d; want succeeded in attempt 2", id, status, attempt)
	}

	effects := svc.checkFencing()
	per := acceptedPerKey(effects)
	for i, want := range []int{1, 1, 2} {
		key := id + "//" + stepID(i+1)
		if i < 2 && per[key] != want {
			t.Errorf("%s executed %d times (accepted requests); want exactly once", key, per[key])
		}
		if i == 2 && (per[key] < 1 || per[key] > want) {
			t.Errorf("%s executed %d times (accepted requests); want once or twice", key, per[key])
		}
	}
	if len(per) != 3 {
		t.Errorf("accepted requests under %d idempotency keys, want 3: %v", len(per), per)
	}
	// The completing execution of s03 is w2's, under the run's final epoch.
	var s03w2 int
	for _, e := range effects {
		if e.stepID == "s03" && e.worker == "w2" && e.accepted {
			s03w2++
		}
		if e.worker == "w2" && e.stepID != "s03" {
			t.Errorf("w2 executed %s (side effect %d) although its checkpoint from attempt 1 exists", e.stepID, e.seq)
		}
	}
	if s03w2 != 1 {
		t.Errorf("w2 executed s03 %d times, want once", s03w2)
	}

	// The ledger, through the CLI: attempt 1's rows and checkpoints stay.
	var ledger struct {
		Run struct {
			Attempt int    `json:"attempt"`
			Status  string `json:"status"`
		} `json:"run"`
		Steps []struct {
			Attempt   int    `json:"attempt"`
			ScopePath string `json:"scope_path"`
			StepID    string `json:"step_id"`
			Status    string `json:"status"`
		} `json:"steps"`
		Checkpoints []struct {
			Attempt   int    `json:"attempt"`
			ScopePath string `json:"scope_path"`
			StepID    string `json:"step_id"`
		} `json:"checkpoints"`
	}
	raw := c.cli("runs", "ledger", id, "--json")
	if err := json.Unmarshal(raw, &ledger); err != nil {
		t.Fatalf("runs ledger --json: %v\n%s", err, raw)
	}
	rows := map[string]string{}
	for _, s := range ledger.Steps {
		rows[stepKey(s.Attempt, s.StepID)] = s.Status
	}
	wantRows := map[string]string{
		stepKey(1, "s01"): "succeeded", stepKey(1, "s02"): "succeeded", stepKey(1, "s03"): "failed",
		stepKey(2, "s03"): "succeeded",
	}
	if !maps.Equal(rows, wantRows) {
		t.Errorf("ledger rows (attempt/step → status) %v; want %v", rows, wantRows)
	}
	cps := map[string]bool{}
	for _, k := range ledger.Checkpoints {
		cps[stepKey(k.Attempt, k.StepID)] = true
	}
	wantCps := map[string]bool{stepKey(1, "s01"): true, stepKey(1, "s02"): true, stepKey(2, "s03"): true}
	if !maps.Equal(cps, wantCps) {
		t.Errorf("checkpoints (attempt/step) %v; want %v", cps, wantCps)
	}
	if ledger.Run.Attempt != 2 || ledger.Run.Status != "succeeded" {
		t.Errorf("runs ledger: run %s attempt %d; want succeeded attempt 2", ledger.Run.Status, ledger.Run.Attempt)
	}
	// The same, straight from the table.
	if n := c.count(`SELECT count(*) FROM workflow_steps WHERE run_id = $1 AND attempt = 1 AND status = 'succeeded' AND step_id IN ('s01', 's02')`, id); n != 2 {
		t.Errorf("%d succeeded rows of s01, s02 in attempt 1, want 2", n)
	}
	c.stopGracefully()
	t.Logf("step executions per key %v; %s", per, time.Since(start).Round(time.Millisecond))
}

func stepKey(attempt int, step string) string { return fmt.Sprintf("%d/%s", attempt, step) }
