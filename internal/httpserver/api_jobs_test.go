package httpserver

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestJobProtocol walks the remote-worker protocol over HTTP with worker
// keys: an empty poll answers 204 after wait_s; a long poll gets a job
// queued while it waits; heartbeat, complete; a stale token is 409
// lease_lost; another workspace's worker sees nothing; a bad type is 422.
func TestJobProtocol(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	alpha, beta := e.keys["alpha/worker"], e.keys["beta/worker"]
	const src = `name: shout
steps:
  - id: up
    job: {type: upper, input: {text: "${{ input.text }}"}}
output: "${{ steps.up.output }}"
`
	if a := e.call("PUT", "/api/workflows/shout", e.keys["alpha/admin"], src); a.status != 200 {
		t.Fatalf("apply: %d %s", a.status, shortBody(a.body))
	}
	start := time.Now()
	if a := e.call("POST", "/api/jobs/poll", alpha, map[string]any{"types": []string{"upper"}, "worker": "w1", "wait_s": 1}); a.status != http.StatusNoContent {
		t.Fatalf("empty poll: %d %s", a.status, shortBody(a.body))
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("an empty poll with wait_s 1 answered after %s", d)
	}
	if a := e.call("POST", "/api/jobs/poll", alpha, map[string]any{"types": []string{"bad type!"}, "worker": "w1"}); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad type: %d %s", a.status, shortBody(a.body))
	}

	// A long poll gets the job enqueued while it waits.
	got := make(chan *apiAnswer, 1)
	go func() {
		got <- e.call("POST", "/api/jobs/poll", alpha, map[string]any{"types": []string{"other", "upper"}, "worker": "w1", "wait_s": 10})
	}()
	time.Sleep(300 * time.Millisecond)
	run := e.enqueue("alpha", "shout", map[string]any{"text": "hi"})
	a := <-got
	var job api.Job
	if a.status != 200 {
		t.Fatalf("long poll: %d %s", a.status, shortBody(a.body))
	}
	a.decode(t, &job)
	if job.RunID != run.ID || job.Type != "upper" || string(job.Input) != `{"text":"hi"}` || job.FencingToken == "" || job.Tries != 1 || job.HeartbeatTimeoutMS != 30000 {
		t.Fatalf("job %+v", job)
	}
	// beta's worker sees no alpha job, and cannot act on it.
	if a := e.call("POST", "/api/jobs/poll", beta, map[string]any{"types": []string{"upper"}, "worker": "wb"}); a.status != http.StatusNoContent {
		t.Fatalf("beta poll: %d", a.status)
	}
	if a := e.call("POST", "/api/jobs/"+job.ID+"/complete", beta, map[string]any{"fencing_token": job.FencingToken, "output": "x"}); a.status != http.StatusNotFound {
		t.Fatalf("beta completes alpha's job: %d %s", a.status, shortBody(a.body))
	}
	// A worker key reads nothing else.
	if a := e.call("GET", "/api/runs/"+run.ID, alpha, nil); a.status != http.StatusForbidden {
		t.Fatalf("worker key reads a run: %d", a.status)
	}
	p := 0.5
	if a := e.call("POST", "/api/jobs/"+job.ID+"/heartbeat", alpha, api.JobHeartbeatRequest{FencingToken: job.FencingToken, Progress: &p, Message: "half"}); a.status != 200 {
		t.Fatalf("heartbeat: %d %s", a.status, shortBody(a.body))
	}
	stale := e.call("POST", "/api/jobs/"+job.ID+"/complete", alpha, map[string]any{"fencing_token": "0000", "output": 1})
	var prob api.Problem
	stale.decode(t, &prob)
	if stale.status != http.StatusConflict || prob.Code != api.CodeLeaseLost {
		t.Fatalf("stale token: %d %+v", stale.status, prob)
	}
	if a := e.call("POST", "/api/jobs/"+job.ID+"/complete", alpha, map[string]any{"fencing_token": job.FencingToken, "output": "HI"}); a.status != 200 {
		t.Fatalf("complete: %d %s", a.status, shortBody(a.body))
	}
	end := e.waitFor(run.ID, "succeeded", func(r *starflowtype.Run) bool { return r.Status.Terminal() })
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != `"HI"` {
		t.Fatalf("run %s %s", end.Status, end.Output)
	}
	// The poll was recorded.
	pollers, err := e.eng.JobPollers(context.Background(), "alpha", []string{"upper"}, time.Minute)
	if err != nil || len(pollers) != 1 || pollers[0].Worker != "w1" {
		t.Fatalf("pollers %+v %v", pollers, err)
	}
}

// TestJobConcurrentHTTPCompletions: 64 concurrent completions of one job
// with one token over HTTP on PostgreSQL: one is 200, 63 are 409, and the
// run is woken once.
func TestJobConcurrentHTTPCompletions(t *testing.T) {
	t.Parallel()
	e := newAPIEnvPG(t)
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: "alpha"})
	j := e.heldJob("alpha")
	var ok, conflict atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch a := e.call("POST", "/api/jobs/"+j.ID+"/complete", e.keys["alpha/worker"], map[string]any{"fencing_token": j.LeaseToken, "output": 1}); a.status {
			case 200:
				ok.Add(1)
			case 409:
				conflict.Add(1)
			default:
				t.Errorf("completion: %d %s", a.status, shortBody(a.body))
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || conflict.Load() != 63 {
		t.Fatalf("%d applied, %d refused; want 1 and 63", ok.Load(), conflict.Load())
	}
	end := e.waitFor(j.RunID, "ended", func(r *starflowtype.Run) bool { return r.Status.Terminal() })
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	evs, err := e.eng.Store().ListEvents(ctx, &state.ListEventsParams{RunID: j.RunID})
	if err != nil {
		t.Fatal(err)
	}
	wakes := 0
	for _, ev := range evs {
		if ev.Type == starflowtype.EventWakeReceived {
			wakes++
		}
	}
	if wakes != 1 {
		t.Fatalf("%d wake_received events, want 1", wakes)
	}
}
