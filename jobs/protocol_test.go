package jobs_test

// The protocol through the client's calls against the real server: the
// long-poll, the claimed job's fields, fencing (a stale token changes
// nothing), and one completion out of many with one token.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// upperDef is one job step of type upper with the given heartbeat
// timeout; its retry policy allows three tries, so a lease left to expire
// is tried again at once.
func upperDef(heartbeat string) string {
	return `name: upper
steps:
  - id: up
    job:
      type: upper
      input: {text: "${{ input.text }}"}
      heartbeat_timeout: ` + heartbeat + `
    retry_policy: {max_attempts: 3, initial_interval: 10ms, max_interval: 10ms}
output: "${{ steps.up.output }}"
`
}

// upperWorkflow's leases (3 s) are short, for the tests of what happens
// when one expires, yet long enough for the calls a test makes with a live
// one on a loaded machine; steadyWorkflow's (10 s) do not expire under a
// live worker.
var (
	upperWorkflow  = upperDef("3s")
	steadyWorkflow = upperDef("10s")
)

// wantStatus wants err to be a problem answer of status, wrapping
// sentinel.
func wantStatus(t *testing.T, what string, err error, status int, sentinel error) {
	t.Helper()
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != status || !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v (%T); want a %d problem wrapping %v", what, err, err, status, sentinel)
	}
}

// TestPollLongPoll: a poll without a wait answers at once with no job
// (204 → nil); a long-poll answers as soon as a job is queued, well
// before its wait, with the job claimed: its type, rendered input, where
// it comes from, its first try, a fencing token and a lease.
func TestPollLongPoll(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(steadyWorkflow)
		ctx := context.Background()
		start := time.Now()
		j, err := e.c.PollJob(ctx, []string{"upper"}, "w1", 0)
		if err != nil || j != nil {
			t.Fatalf("poll with nothing queued: %+v, %v; want nil, nil", j, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("a poll without a wait took %s", d)
		}

		got := make(chan *api.Job, 1)
		errc := make(chan error, 1)
		start = time.Now()
		go func() {
			j, err := e.c.PollJob(ctx, []string{"other", "upper"}, "w1", 20*time.Second)
			got <- j
			errc <- err
		}()
		time.Sleep(300 * time.Millisecond)
		runID := e.enqueue("upper", map[string]any{"text": "hi"})
		j, err = <-got, <-errc
		if err != nil || j == nil {
			t.Fatalf("long-poll: %+v, %v", j, err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("the long-poll answered after %s: not when the job was queued", d)
		}
		var in map[string]any
		if err := json.Unmarshal(j.Input, &in); err != nil || in["text"] != "hi" {
			t.Errorf("input %s, want {\"text\": \"hi\"}", j.Input)
		}
		if j.Type != "upper" || j.RunID != runID || j.StepID != "up" || j.ScopePath != "" || j.Attempt != 1 || j.Tries != 1 {
			t.Errorf("job %+v; want type upper of run %s, step up at the root, attempt 1, try 1", j, runID)
		}
		if j.ID == "" || j.FencingToken == "" || j.IdempotencyKey == "" || j.HeartbeatTimeoutMS != 10000 || !j.LeaseUntil.After(time.Now().Add(-time.Minute)) {
			t.Errorf("job %+v; want an id, a token, an idempotency key, a 10000 ms heartbeat timeout and a lease", j)
		}
		if by := e.str(`SELECT leased_by FROM worker_jobs WHERE id = $1`, j.ID); by != "w1" {
			t.Errorf("leased_by %q, want w1", by)
		}
	})
}

// TestStaleTokenRefused: a job whose lease expired is queued again by the
// sweep and claimed with a new token; the first claim's heartbeat,
// completion and failure are then refused with 409 (ErrLeaseLost) and
// change nothing, the new claim's work, and a second completion with the
// new token is refused too. An unknown job is 404 (ErrNotFound).
func TestStaleTokenRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(upperWorkflow)
		ctx := context.Background()
		runID := e.enqueue("upper", map[string]any{"text": "x"})
		first := e.poll("w1", "upper")
		// No heartbeat: the lease (3 s) expires and the sweep queues the
		// job again for the next poll.
		second := e.poll("w2", "upper")
		if second.ID != first.ID || second.Tries != 2 || second.FencingToken == first.FencingToken {
			t.Fatalf("second claim %+v after %+v; want the same job, try 2, a new token", second, first)
		}
		events := e.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1`, runID)

		_, err := e.c.HeartbeatJob(ctx, first.ID, api.JobHeartbeatRequest{FencingToken: first.FencingToken})
		wantStatus(t, "heartbeat with the stale token", err, http.StatusConflict, starflowtype.ErrLeaseLost)
		_, err = e.c.CompleteJob(ctx, first.ID, api.JobCompleteRequest{FencingToken: first.FencingToken, Output: json.RawMessage(`{"text": "stale"}`)})
		wantStatus(t, "complete with the stale token", err, http.StatusConflict, starflowtype.ErrLeaseLost)
		_, err = e.c.FailJob(ctx, first.ID, api.JobFailRequest{FencingToken: first.FencingToken, Error: starflowtype.ErrorInfo{Type: "stale", Message: "stale"}})
		wantStatus(t, "fail with the stale token", err, http.StatusConflict, starflowtype.ErrLeaseLost)
		_, err = e.c.HeartbeatJob(ctx, "00000000-0000-4000-8000-000000000000", api.JobHeartbeatRequest{FencingToken: first.FencingToken})
		wantStatus(t, "heartbeat of an unknown job", err, http.StatusNotFound, starflowtype.ErrNotFound)
		if st := e.str(`SELECT status FROM worker_jobs WHERE id = $1`, first.ID); st != "running" {
			t.Fatalf("after the stale calls the job is %s, want running (the second claim's)", st)
		}
		if n := e.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1`, runID); n != events {
			t.Fatalf("the stale calls wrote %d events", n-events)
		}

		hb, err := e.c.HeartbeatJob(ctx, second.ID, api.JobHeartbeatRequest{FencingToken: second.FencingToken})
		if err != nil || !hb.LeaseUntil.After(second.LeaseUntil.Add(-time.Millisecond)) {
			t.Fatalf("heartbeat with the live token: %+v, %v", hb, err)
		}
		res, err := e.c.CompleteJob(ctx, second.ID, api.JobCompleteRequest{FencingToken: second.FencingToken, Output: json.RawMessage(`{"text": "X"}`)})
		if err != nil || res.Status != "succeeded" || res.ID != second.ID {
			t.Fatalf("complete with the live token: %+v, %v", res, err)
		}
		_, err = e.c.CompleteJob(ctx, second.ID, api.JobCompleteRequest{FencingToken: second.FencingToken, Output: json.RawMessage(`{"text": "again"}`)})
		wantStatus(t, "a second completion", err, http.StatusConflict, starflowtype.ErrLeaseLost)
		run := e.wait(runID)
		if run.Status != starflowtype.RunSucceeded || output(t, run)["text"] != "X" {
			t.Fatalf("run %s %s, output %s; want succeeded with the live claim's output", run.ID, run.Status, run.Output)
		}
	})
}

// TestOneCompletionOf64: 64 completions of one job sent at once with its
// token: exactly one applies (one 200, 63 × 409), the step completes once
// (one node_complete event, one checkpoint) with that completion's output.
func TestOneCompletionOf64(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(steadyWorkflow)
		runID := e.enqueue("upper", map[string]any{"text": "race"})
		j := e.poll("w1", "upper")
		const n = 64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = e.c.CompleteJob(context.Background(), j.ID, api.JobCompleteRequest{
					FencingToken: j.FencingToken, Output: json.RawMessage(fmt.Sprintf(`{"text": "RACE", "n": %d}`, i))})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("completions %d and %d both applied", winner, i)
			case err == nil:
				winner = i
			default:
				wantStatus(t, fmt.Sprintf("completion %d", i), err, http.StatusConflict, starflowtype.ErrLeaseLost)
			}
		}
		if winner < 0 {
			t.Fatal("no completion applied")
		}
		run := e.wait(runID)
		if run.Status != starflowtype.RunSucceeded || output(t, run)["n"] != float64(winner) {
			t.Fatalf("run %s, output %s; want succeeded with completion %d's output", run.Status, run.Output, winner)
		}
		if c := e.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = $1 AND event_type = 'node_complete' AND node_id = 'up'`, runID); c != 1 {
			t.Errorf("%d node_complete events of the job step, want 1", c)
		}
		if c := e.count(`SELECT count(*) FROM workflow_run_checkpoints WHERE run_id = $1 AND step_id = 'up'`, runID); c != 1 {
			t.Errorf("%d checkpoints of the job step, want 1", c)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(e.str(`SELECT output_json FROM worker_jobs WHERE id = $1`, j.ID)), &out); err != nil || out["n"] != float64(winner) {
			t.Errorf("worker_jobs.output_json %v (%v); want completion %d's", out, err, winner)
		}
	})
}
