package crashtest

// Remote workers as real processes (issue 15): the shell-script worker of
// examples/workers completes the job steps of real runs on PostgreSQL
// (`starflow server` serving the API, `starflow worker` executing the
// runs), and a worker SIGKILLed mid-job loses the job to another after its
// lease, its late completion refused.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/starflowtype"
)

// requireShellTools skips t when bash, curl or jq is missing, or fails it
// when CI is set (.ci/run installs jq).
func requireShellTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed and CI is set, so the shell-worker tests may not be skipped", tool)
			}
			t.Skipf("%s is not installed: the shell-worker tests need bash, curl and jq", tool)
		}
	}
}

// shellWorkerScript is examples/workers/shell-worker.sh.
func shellWorkerScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", "workers", "shell-worker.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serverURL is the API address a `starflow server` printed.
func (p *process) serverURL(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("%s printed no listening address:\n%s", p.name, p.log.String())
	}
	return m[1]
}

// workerKey creates an API key of role worker with `starflow keys create`.
func (c *cluster) workerKey() string {
	c.t.Helper()
	key := strings.TrimSpace(string(c.cli("keys", "create", "--name", "shell-workers", "--role", "worker", "--workspace", "default")))
	if !strings.HasPrefix(key, "sf_") {
		c.t.Fatalf("keys create printed %q, not a key", key)
	}
	return key
}

// startShellWorker starts the shell-script worker named name serving
// types (comma-separated) of the server at url with key, in a process
// group of its own (its handlers are its children: a SIGKILL of the group
// is the machine going away).
func (c *cluster) startShellWorker(name, url, key, types string) *process {
	c.t.Helper()
	cmd := exec.Command("bash", shellWorkerScript(c.t))
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "STARFLOW_SERVER="+url, "STARFLOW_API_KEY="+key, "TYPES="+types,
		"WORKER_ID="+name, "POLL_WAIT=2", "SHUTDOWN_GRACE=10")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &process{name: name, cmd: cmd, log: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	// The group is killed only while its leader runs: once the leader is
	// gone (and the worker stops its own handlers before it exits) the
	// group id may belong to another process group — pids wrap quickly on
	// a busy machine.
	c.t.Cleanup(func() {
		if p.running() {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
	})
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	waitFor(c.t, 30*time.Second, name+" to start", func() bool {
		if !p.running() {
			c.t.Fatalf("%s exited at start:\n%s", name, p.log.String())
		}
		return strings.Contains(p.log.String(), "serving ")
	})
	return p
}

// killGroup SIGKILLs the process and its children and waits for it.
func (p *process) killGroup(t *testing.T) {
	t.Helper()
	p.killed = true
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	p.waitExit(t, 30*time.Second)
}

// waitRun waits for a run to end and returns its status.
func (c *cluster) waitRun(id string, timeout time.Duration) string {
	c.t.Helper()
	var status string
	waitFor(c.t, timeout, "run "+id+" to end", func() bool {
		status, _, _ = c.runStatus(id)
		return status == "succeeded" || status == "failed" || status == "cancelled"
	})
	return status
}

const shoutBadWorkflow = `name: shout-bad
steps:
  - id: guard
    try:
      steps:
        - id: shout
          job: {type: uppercase, input: {text: 5}}
      catch:
        - id: caught
          pass: "${{ error }}"
output: "${{ steps.guard.output }}"
`

// TestShellWorkerCompletesJobSteps: the shell-script worker, with a
// worker key, serves the job steps of examples/workers/shout.yaml for
// runs executed by a `starflow worker` on PostgreSQL — every run succeeds
// with the worker's outputs, each job in one try — and its typed error
// (input_invalid) reaches a catch. SIGTERM stops it at once while it
// waits for jobs.
func TestShellWorkerCompletesJobSteps(t *testing.T) {
	requireShellTools(t)
	c := newCluster(t, 8)
	key := c.workerKey()
	srv := c.startServer()
	c.startWorker("runner", "--poll-interval", "100ms")
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "workers", "shout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.apply("shout", string(src))
	c.apply("shout-bad", shoutBadWorkflow)
	sw := c.startShellWorker("shell-1", srv.serverURL(t), key, "uppercase,sleep")

	ctx := context.Background()
	texts := map[string]string{}
	for _, text := range []string{"hello, workers", "Mixed Case, 3 words", "three"} {
		run, err := c.engine.Enqueue(ctx, "shout", map[string]any{"text": text, "nap_seconds": 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		texts[run.ID] = text
	}
	bad, err := c.engine.Enqueue(ctx, "shout-bad", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, text := range texts {
		if st := c.waitRun(id, 90*time.Second); st != "succeeded" {
			t.Fatalf("run %s: %s\n%s", id, st, sw.log.String())
		}
		out, _ := c.runOutput(id).(map[string]any)
		if out["shouted"] != strings.ToUpper(text) || out["slept"] != 1.0 {
			t.Errorf("run %s output %v; want shouted %q, slept 1", id, out, strings.ToUpper(text))
		}
	}
	if st := c.waitRun(bad.ID, 60*time.Second); st != "succeeded" {
		t.Fatalf("run shout-bad: %s", st)
	}
	if e, _ := c.runOutput(bad.ID).(map[string]any); e["type"] != "input_invalid" || !strings.Contains(e["message"].(string), "input.text") {
		t.Errorf("the caught error %v; want the worker's input_invalid", e)
	}
	if n := c.count(`SELECT count(*) FROM worker_jobs WHERE status = 'succeeded' AND tries = 1 AND leased_by = 'shell-1'`); n != 2*len(texts) {
		t.Errorf("%d jobs succeeded in one try by shell-1, want %d", n, 2*len(texts))
	}
	if n := c.count(`SELECT count(*) FROM worker_jobs WHERE status = 'failed' AND tries = 1 AND error_json::jsonb->>'type' = 'input_invalid'`); n != 1 {
		t.Errorf("%d jobs failed input_invalid, want 1", n)
	}
	start := time.Now()
	sw.signal(t, syscall.SIGTERM)
	if code := sw.waitExit(t, 10*time.Second); code != 0 {
		t.Fatalf("the shell worker exited %d after SIGTERM:\n%s", code, sw.log.String())
	}
	if d := time.Since(start); d > 5*time.Second || !strings.Contains(sw.log.String(), "stopped") {
		t.Errorf("the idle shell worker took %s to stop after SIGTERM:\n%s", d, sw.log.String())
	}
}

const napWorkflow = `name: nap
steps:
  - id: nap
    job: {type: sleep, input: {seconds: 3}, heartbeat_timeout: 5s}
    retry_policy: {max_attempts: 3, initial_interval: 10ms, max_interval: 10ms}
output: "${{ steps.nap.output }}"
`

var claimedLine = regexp.MustCompile(`claimed job (\S+) \(type sleep, run (\S+), step nap, try (\d+)\)`)

// TestSIGKILLRemoteWorkerMidJob: a shell worker SIGKILLed (with its
// handler) mid-job loses the job: after its lease (5 s: a live worker's
// heartbeats, every third of it, survive a loaded CI machine) the sweep queues it
// again, another worker claims it (try 2) and completes the run. The first
// claim's completion, replayed afterwards with its token, gets 409 and
// changes nothing — nor do its heartbeat and failure.
func TestSIGKILLRemoteWorkerMidJob(t *testing.T) {
	requireShellTools(t)
	c := newCluster(t, 8)
	key := c.workerKey()
	srv := c.startServer()
	url := srv.serverURL(t)
	c.startWorker("runner", "--poll-interval", "100ms")
	c.apply("nap", napWorkflow)
	first := c.startShellWorker("shell-a", url, key, "sleep")
	run, err := c.engine.Enqueue(context.Background(), "nap", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var jobID string
	waitFor(t, 60*time.Second, "shell-a to claim the job", func() bool {
		m := claimedLine.FindStringSubmatch(first.log.String())
		if m == nil {
			return false
		}
		if m[2] != run.ID || m[3] != "1" {
			t.Fatalf("shell-a claimed %v; want run %s's job at try 1", m, run.ID)
		}
		jobID = m[1]
		return true
	})
	var staleToken string
	if err := c.pool().QueryRow(context.Background(), `SELECT lease_token FROM worker_jobs WHERE id = $1`, jobID).Scan(&staleToken); err != nil {
		t.Fatal(err)
	}
	first.killGroup(t)
	killedAt := time.Now()

	second := c.startShellWorker("shell-b", url, key, "sleep")
	if st := c.waitRun(run.ID, 90*time.Second); st != "succeeded" {
		t.Fatalf("run %s after the SIGKILL:\nshell-b:\n%s", st, second.log.String())
	}
	if m := claimedLine.FindStringSubmatch(second.log.String()); m == nil || m[1] != jobID || m[3] != "2" {
		t.Fatalf("shell-b did not claim the job at try 2:\n%s", second.log.String())
	}
	var tries int
	var leasedBy string
	var updated time.Time
	if err := c.pool().QueryRow(context.Background(), `SELECT tries, leased_by, updated_at FROM worker_jobs WHERE id = $1`, jobID).Scan(&tries, &leasedBy, &updated); err != nil {
		t.Fatal(err)
	}
	if tries != 2 || leasedBy != "shell-b" {
		t.Fatalf("job: %d tries, leased by %s; want 2, shell-b", tries, leasedBy)
	}
	if d := time.Since(killedAt); d < 5*time.Second {
		t.Fatalf("the job was done %s after the SIGKILL: before the 5 s lease could expire", d)
	}
	if out, _ := c.runOutput(run.ID).(map[string]any); out["slept"] != 3.0 {
		t.Fatalf("run output %v, want {slept: 3}", out)
	}
	events := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1`, run.ID)
	completes := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'node_complete' AND node_id = 'nap'`, run.ID)

	// The first worker's late answers, with its token.
	cl := client.New(url, key)
	ctx := context.Background()
	_, err = cl.CompleteJob(ctx, jobID, api.JobCompleteRequest{FencingToken: staleToken, Output: json.RawMessage(`{"slept": 999}`)})
	wantConflict(t, "the late completion", err)
	_, err = cl.FailJob(ctx, jobID, api.JobFailRequest{FencingToken: staleToken, Error: starflowtype.ErrorInfo{Type: "late", Message: "late"}})
	wantConflict(t, "the late failure", err)
	_, err = cl.HeartbeatJob(ctx, jobID, api.JobHeartbeatRequest{FencingToken: staleToken})
	wantConflict(t, "the late heartbeat", err)

	if out, _ := c.runOutput(run.ID).(map[string]any); out["slept"] != 3.0 {
		t.Errorf("after the late completion the run's output is %v", out)
	}
	var status string
	var output []byte
	var updated2 time.Time
	if err := c.pool().QueryRow(ctx, `SELECT status, output_json::text, updated_at FROM worker_jobs WHERE id = $1`, jobID).Scan(&status, &output, &updated2); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || strings.Contains(string(output), "999") || !updated2.Equal(updated) {
		t.Errorf("after the late calls the job is %s with output %s (updated %s, was %s)", status, output, updated2, updated)
	}
	if n := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1`, run.ID); n != events {
		t.Errorf("the late calls wrote %d events", n-events)
	}
	if n := c.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'node_complete' AND node_id = 'nap'`, run.ID); n != completes || n != 1 {
		t.Errorf("%d node_complete events of the job step, want 1", n)
	}
}

func wantConflict(t *testing.T, what string, err error) {
	t.Helper()
	var p *api.Problem
	if !errors.Is(err, starflowtype.ErrLeaseLost) || !errors.As(err, &p) || p.Status != http.StatusConflict {
		t.Fatalf("%s: %v; want 409 (ErrLeaseLost)", what, err)
	}
}

const napLongWorkflow = `name: nap-long
steps:
  - id: nap
    job: {type: sleep, input: {seconds: "${{ input.seconds }}"}, heartbeat_timeout: 4s}
output: "${{ steps.nap.output }}"
`

// TestShellWorkerCancelAndGracefulStop: a run cancelled while the shell
// worker runs its job gets the next heartbeat refused (409): the worker
// stops the handler, drops its result and serves the next job; SIGTERM
// during that job lets it finish and report within the grace, then the
// worker exits 0.
func TestShellWorkerCancelAndGracefulStop(t *testing.T) {
	requireShellTools(t)
	c := newCluster(t, 8)
	key := c.workerKey()
	srv := c.startServer()
	c.startWorker("runner", "--poll-interval", "100ms")
	c.apply("nap-long", napLongWorkflow)
	sw := c.startShellWorker("shell-c", srv.serverURL(t), key, "sleep")
	ctx := context.Background()
	long, err := c.engine.Enqueue(ctx, "nap-long", map[string]any{"seconds": 60}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "shell-c to claim the long job", func() bool {
		m := claimedLine.FindStringSubmatch(sw.log.String())
		return m != nil && m[2] == long.ID
	})
	c.cli("runs", "cancel", long.ID)
	waitFor(t, 20*time.Second, "shell-c to drop the cancelled job", func() bool {
		l := sw.log.String()
		return strings.Contains(l, "heartbeat refused (409)") && strings.Contains(l, "lease lost; its result is dropped")
	})
	if st := c.waitRun(long.ID, 30*time.Second); st != "cancelled" {
		t.Fatalf("the cancelled run is %s", st)
	}

	short, err := c.engine.Enqueue(ctx, "nap-long", map[string]any{"seconds": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "shell-c to claim the next job", func() bool {
		return strings.Contains(sw.log.String(), ", run "+short.ID+",")
	})
	sw.signal(t, syscall.SIGTERM)
	if code := sw.waitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("the shell worker exited %d after SIGTERM:\n%s", code, sw.log.String())
	}
	if st := c.waitRun(short.ID, 30*time.Second); st != "succeeded" {
		t.Fatalf("the job running at SIGTERM: its run %s\n%s", st, sw.log.String())
	}
	if out, _ := c.runOutput(short.ID).(map[string]any); out["slept"] != 2.0 {
		t.Fatalf("output %v, want {slept: 2}", out)
	}
}
