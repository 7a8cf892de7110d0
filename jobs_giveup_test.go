package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

// TestJobAbandonedByCatchIsCancelled: a job step in a lane that a try
// gives up (a sibling lane failed and the try caught it) is recorded
// failed and its job cancelled: no worker claims it while the run goes on.
func TestJobAbandonedByCatchIsCancelled(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: abandonjob
steps:
  - id: guard
    try:
      steps:
        - id: fan
          parallel:
            fail_fast: false
            lanes:
              a: [{id: charge, job: {type: charge-card}}]
              b: [{id: boom, fail: {message: broken}}]
      catch:
        - id: handled
          context_set: {caught: "${{ error.message }}"}
  - id: final
    wait: {signal: final}
`)
	run := h.enqueue("abandonjob", nil)
	awaitRun(t, h, run.ID, "parked at final", func(r *starflowtype.Run) bool {
		return r.ClaimState == starflowtype.ClaimParked && len(h.waits(run.ID)) == 2
	})
	if st := stepByID(h.steps(run.ID), "charge"); st == nil || st.Status != starflowtype.StepFailed {
		t.Fatalf("abandoned job step: %+v", st)
	}
	j, err := h.eng.PollJob(context.Background(), "", []string{"charge-card"}, "w1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if j != nil {
		_, cerr := h.eng.CompleteJob(context.Background(), "", j.ID, j.LeaseToken, json.RawMessage(`{"charged": true}`))
		t.Fatalf("the job of step charge, abandoned by the try, was still claimed by a worker (try %d; its completion: %v)", j.Tries, cerr)
	}
}

// TestJobRaceLoserIsCancelled: a race between a job and a timer; the timer
// wins (decided when the run resumes), the job lane is given up and its job
// cancelled.
func TestJobRaceLoserIsCancelled(t *testing.T) {
	h := newHarness(t, starflow.Config{Maintenance: true, WaitMaintenance: starflow.WaitMaintenanceConfig{TimerInterval: 50 * time.Millisecond}})
	h.start()
	h.apply(`name: racejob
steps:
  - id: first
    parallel:
      mode: race
      lanes:
        work: [{id: slowjob, job: {type: slow-side-effect}}]
        clock: [{id: tick, wait: {timer: 200ms}}]
  - id: final
    wait: {signal: final}
`)
	run := h.enqueue("racejob", nil)
	awaitRun(t, h, run.ID, "parked at final", func(r *starflowtype.Run) bool {
		st := stepByID(h.steps(run.ID), "final")
		return r.ClaimState == starflowtype.ClaimParked && st != nil && st.Status == starflowtype.StepWaiting
	})
	if st := stepByID(h.steps(run.ID), "slowjob"); st == nil || st.Status == starflowtype.StepWaiting {
		t.Fatalf("race-losing job step: %+v", st)
	}
	j, err := h.eng.PollJob(context.Background(), "", []string{"slow-side-effect"}, "w1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if j != nil {
		t.Fatalf("the job of the lane that lost the race is still claimable (status %s)", j.Status)
	}
}

// TestJobCompleteOutputValidated: a worker's output holding a reserved key
// or a number with no finite value is refused as a signal's payload is
// (ErrPayloadInvalid), and the job is left running.
func TestJobCompleteOutputValidated(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	d := h.apply(jobFlow)
	for _, out := range []string{`{"size": 1, "__celestialBlob": "x"}`, `{"size": 1e999}`} {
		run, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"n": 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		j := pollOne(t, h, "resize", "w1")
		done, err := h.eng.CompleteJob(ctx, "", j.ID, j.LeaseToken, json.RawMessage(out))
		if err == nil {
			end := awaitEnd(t, h, run.ID)
			t.Fatalf("output %s accepted (job %s); the run then ended %s: %s", out, done.Status, end.Status, end.Error)
		}
		if !errors.Is(err, starflowtype.ErrPayloadInvalid) {
			t.Fatalf("output %s: %v, want ErrPayloadInvalid", out, err)
		}
		if got, _ := h.eng.Job(ctx, "", j.ID); got.Status != starflowtype.JobRunning {
			t.Fatalf("job after a refused completion: %s, want running", got.Status)
		}
		if _, err := h.eng.CompleteJob(ctx, "", j.ID, j.LeaseToken, json.RawMessage(`{"size": 1}`)); err != nil {
			t.Fatal(err)
		}
		if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded {
			t.Fatalf("run %s", end.Status)
		}
	}
}
