package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// jobFlow is a workflow whose middle step is a remote worker's job.
const jobFlow = `name: jobs
max_attempts: 1
steps:
  - id: before
    context_set: {n: "${{ input.n }}"}
  - id: resize
    job:
      type: resize
      input: {n: "${{ variables.n }}", label: "${{ 'item-' + string(input.n) }}"}
      heartbeat_timeout: 1s
    retry_policy: {max_attempts: 2, initial_interval: 10ms, max_interval: 20ms}
    output: "${{ {'size': output.size * 2} }}"
  - id: after
    pass: "${{ steps.resize.output.size + 1 }}"
output: "${{ steps.after.output }}"
`

// pollOne claims the next job of type typ, waiting up to 10 s.
func pollOne(t *testing.T, h *harness, typ, worker string) *starflowtype.WorkerJob {
	t.Helper()
	j, err := h.eng.PollJob(context.Background(), "", []string{typ}, worker, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if j == nil {
		t.Fatalf("no job of type %s within 10 s", typ)
	}
	return j
}

// TestJobStepCompletes: a job step parks its run (no runner held), a
// worker claims the job with its rendered input, and completing it resumes
// the run with the worker's output.
func TestJobStepCompletes(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	d := h.apply(jobFlow)
	run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"n": 21}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := pollOne(t, h, "resize", "w1")
	if j.RunID != run.ID || j.StepID != "resize" || j.Tries != 1 || j.Status != starflowtype.JobRunning || j.LeasedBy != "w1" {
		t.Fatalf("claimed %+v", j)
	}
	if got := jsonOf(t, j.Input); got["n"] != float64(21) || got["label"] != "item-21" {
		t.Fatalf("job input %s", j.Input)
	}
	if j.IdempotencyKey == "" || j.LeaseToken == "" || j.HeartbeatTimeout != time.Second {
		t.Fatalf("job lease fields: %+v", j)
	}
	parked := awaitParked(t, h, run.ID)
	if parked.LeasedBy != "" {
		t.Fatalf("a run waiting for a job holds a runner: %+v", parked)
	}
	if _, err := h.eng.HeartbeatJob(ctx, "", j.ID, j.LeaseToken, nil, ""); err != nil {
		t.Fatal(err)
	}
	done, err := h.eng.CompleteJob(ctx, "", j.ID, j.LeaseToken, json.RawMessage(`{"size": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != starflowtype.JobSucceeded {
		t.Fatalf("completed job is %s", done.Status)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "21" {
		t.Fatalf("run ended %s with %s (%s)", end.Status, end.Output, end.Error)
	}
	// Completing again: the job is no longer running.
	if _, err := h.eng.CompleteJob(ctx, "", j.ID, j.LeaseToken, json.RawMessage(`1`)); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("second completion: %v, want ErrLeaseLost", err)
	}
}

// TestJobFailureTypedAndRetried: a retryable failure queues the job again
// (a new try with a new token); a second failure, with no try left, fails
// the step with the worker's typed error, which a try/catch sees.
func TestJobFailureTypedAndRetried(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	src := `name: jobfail
steps:
  - id: guarded
    try:
      steps:
        - id: work
          job: {type: flaky}
          retry_policy: {max_attempts: 2, initial_interval: 10ms, max_interval: 20ms}
      catch:
        - id: seen
          pass: "${{ {'type': error.type, 'message': error.message, 'code': error.details.code} }}"
output: "${{ steps.guarded.output }}"
`
	d := h.apply(src)
	run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j1 := pollOne(t, h, "flaky", "w1")
	info := starflowtype.ErrorInfo{Type: "quota", Message: "over quota", Details: map[string]any{"code": 7}}
	f1, err := h.eng.FailJob(ctx, "", j1.ID, j1.LeaseToken, info, true)
	if err != nil {
		t.Fatal(err)
	}
	if f1.Status != starflowtype.JobQueued {
		t.Fatalf("a retryable failure with a try left: job %s, want queued", f1.Status)
	}
	j2 := pollOne(t, h, "flaky", "w2")
	if j2.ID != j1.ID || j2.Tries != 2 || j2.LeaseToken == j1.LeaseToken || j2.LeaseEpoch != j1.LeaseEpoch+1 {
		t.Fatalf("second claim %+v after %+v", j2, j1)
	}
	// The first try's token is stale now.
	if _, err := h.eng.CompleteJob(ctx, "", j1.ID, j1.LeaseToken, nil); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("completion with the first claim's token: %v, want ErrLeaseLost", err)
	}
	f2, err := h.eng.FailJob(ctx, "", j2.ID, j2.LeaseToken, info, true)
	if err != nil {
		t.Fatal(err)
	}
	if f2.Status != starflowtype.JobFailed {
		t.Fatalf("no try left: job %s, want failed", f2.Status)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	got := jsonOf(t, end.Output)
	if got["type"] != "quota" || got["code"] != float64(7) {
		t.Fatalf("the catch saw %v", got)
	}
}

// TestJobLeaseExpiresAndLateCompletionRefused: a worker that stops
// heartbeating loses the job to the sweep, another worker claims it, and
// the first worker's late completion is refused and changes nothing.
func TestJobLeaseExpiresAndLateCompletionRefused(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	d := h.apply(jobFlow)
	run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j1 := pollOne(t, h, "resize", "w1")
	time.Sleep(1100 * time.Millisecond) // past the 1 s heartbeat timeout
	expired, err := h.store.ExpireJobLeases(ctx, &state.ExpireJobLeasesParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].Status != starflowtype.JobQueued {
		t.Fatalf("sweep changed %+v, want the job queued again", expired)
	}
	j2 := pollOne(t, h, "resize", "w2")
	if j2.Tries != 2 || j2.LeasedBy != "w2" {
		t.Fatalf("re-claim %+v", j2)
	}
	if _, err := h.eng.CompleteJob(ctx, "", j1.ID, j1.LeaseToken, json.RawMessage(`{"size": 999}`)); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("late completion: %v, want ErrLeaseLost", err)
	}
	if _, err := h.eng.HeartbeatJob(ctx, "", j1.ID, j1.LeaseToken, nil, ""); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("late heartbeat: %v, want ErrLeaseLost", err)
	}
	if _, err := h.eng.CompleteJob(ctx, "", j2.ID, j2.LeaseToken, json.RawMessage(`{"size": 5}`)); err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "11" {
		t.Fatalf("run ended %s with %s", end.Status, end.Output)
	}
	// With its last try expired the job fails the step with a timeout.
	run2, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"n": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 2; try++ {
		pollOne(t, h, "resize", "w1")
		time.Sleep(1100 * time.Millisecond)
		if _, err := h.store.ExpireJobLeases(ctx, &state.ExpireJobLeasesParams{}); err != nil {
			t.Fatal(err)
		}
	}
	end2 := awaitEnd(t, h, run2.ID)
	if end2.Status != starflowtype.RunFailed || end2.ErrorDetail == nil || jsonOf(t, end2.ErrorDetail)["type"] != "timeout" {
		t.Fatalf("run ended %s: %s %s", end2.Status, end2.Error, end2.ErrorDetail)
	}
}

// TestJobConcurrentCompletions: of 64 concurrent completions with one
// token exactly one applies.
func TestJobConcurrentCompletions(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	d := h.apply(jobFlow)
	run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"n": 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := pollOne(t, h, "resize", "w1")
	var ok, lost atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.eng.CompleteJob(ctx, "", j.ID, j.LeaseToken, json.RawMessage(`{"size": `+string(rune('0'+i%10))+`}`))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, starflowtype.ErrLeaseLost):
				lost.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || lost.Load() != 63 {
		t.Fatalf("%d completions applied, %d refused; want 1 and 63", ok.Load(), lost.Load())
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s", end.Status)
	}
	if n := countEvents(h.events(run.ID), starflowtype.EventWakeReceived, ""); n != 1 {
		t.Fatalf("%d wake_received events, want 1", n)
	}
}

// TestJobTimeoutAndCancel: a job's timeout fails its step with error type
// timeout and cancels the job (the worker holding it is refused); an
// operator's cancel of a run waiting for a job cancels the job too.
func TestJobTimeoutAndCancel(t *testing.T) {
	h := newHarness(t, starflow.Config{Maintenance: true, WaitMaintenance: starflow.WaitMaintenanceConfig{TimerInterval: 50 * time.Millisecond}})
	h.start()
	ctx := context.Background()
	d := h.apply(`name: deadline
max_attempts: 1
steps:
  - id: slow
    job: {type: slow, timeout: 1s}
`)
	run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := pollOne(t, h, "slow", "w1")
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunFailed || jsonOf(t, end.ErrorDetail)["type"] != "timeout" {
		t.Fatalf("run %s: %s %s", end.Status, end.Error, end.ErrorDetail)
	}
	if _, err := h.eng.HeartbeatJob(ctx, "", j.ID, j.LeaseToken, nil, ""); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("heartbeat after the timeout: %v, want ErrLeaseLost", err)
	}
	if got, _ := h.eng.Job(ctx, "", j.ID); got.Status != starflowtype.JobCancelled {
		t.Fatalf("job after its timeout: %s, want cancelled", got.Status)
	}

	d2 := h.apply(jobFlow)
	run2, err := h.eng.Enqueue(ctx, d2.Name, map[string]any{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j2 := pollOne(t, h, "resize", "w1")
	awaitParked(t, h, run2.ID)
	if _, err := h.eng.Cancel(ctx, run2.ID); err != nil {
		t.Fatal(err)
	}
	if end := awaitEnd(t, h, run2.ID); end.Status != starflowtype.RunCancelled {
		t.Fatalf("run %s, want cancelled", end.Status)
	}
	if _, err := h.eng.CompleteJob(ctx, "", j2.ID, j2.LeaseToken, nil); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("completion after the cancel: %v, want ErrLeaseLost", err)
	}
}
