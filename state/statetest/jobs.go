package statetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// jobWait is the RegisterWait of a job step at k: a job of type typ with
// two tries and the given heartbeat timeout.
func jobWait(k state.StepKey, l starflowtype.Lease, typ string, heartbeat time.Duration) *state.RegisterWaitParams {
	return &state.RegisterWaitParams{StepKey: k, Lease: l, Kind: starflowtype.WaitJob, CorrelationKey: k.ScopePath + "#" + k.StepID,
		Job: &state.JobSpec{Type: typ, Input: json.RawMessage(`{"n":1}`), MaxTries: 2, HeartbeatTimeout: heartbeat,
			Retry: state.JobRetry{InitialMS: 1, MaxMS: 1, Backoff: 1, Jitter: "none", RetryExpired: true}, IdempotencyKey: "idem-" + k.StepID}}
}

// claimJob polls for typ, failing unless a job comes back.
func (h *harness) claimJob(ws, typ, worker string) *starflowtype.WorkerJob {
	h.t.Helper()
	j, err := h.a.ClaimJob(h.ctx(), &state.ClaimJobParams{WorkspaceID: ws, Types: []string{"other", typ}, Worker: worker, RecordPoll: true})
	if err != nil || j == nil {
		h.t.Fatalf("ClaimJob(%s) = %+v, %v; want a job", typ, j, err)
	}
	return j
}

// noJob fails unless a poll for typ claims nothing.
func (h *harness) noJob(ws, typ string) {
	h.t.Helper()
	j, err := h.a.ClaimJob(h.ctx(), &state.ClaimJobParams{WorkspaceID: ws, Types: []string{typ}, Worker: "nobody"})
	if err != nil || j != nil {
		h.t.Fatalf("ClaimJob(%s) = %+v, %v; want none", typ, j, err)
	}
}

func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Fatalf("%s: %v, want ErrLeaseLost", what, err)
	}
}

// testJobs: state.Jobs — a job written with its wait, claimed with a
// lease and a fencing token, heartbeated, failed and tried again,
// completed (waking its wait); a stale token refused; an expired lease
// queued again and then failed; a job cancelled with its run; a completed
// job whose attempt was interrupted before it resumed handed to the next
// attempt from the inbox instead of a second job. One adapter, the cases
// in sequence (each leaves nothing claimable behind).
func (s *suite) testJobs(t *testing.T) {
	t.Parallel()
	h := s.durableWaits(t)
	ws := state.DefaultWorkspace

	// Written with the wait, claimed once.
	run, l := h.startOwn(runnerA)
	k := stepKey(run, "items/0", "resize")
	h.pause(k, l)
	w := h.register(jobWait(k, l, "resize", leaseTTL))
	h.park(run.ID, l)
	j, err := h.a.GetJob(h.ctx(), &state.GetJobParams{ID: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "job status", j.Status, starflowtype.JobQueued)
	equal(t, "job scope", j.ScopePath, "items/0")
	equal(t, "job max tries", j.MaxTries, 2)
	if _, err := h.a.GetJob(h.ctx(), &state.GetJobParams{ID: w.ID, WorkspaceID: "elsewhere"}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("GetJob from another workspace: %v, want ErrNotFound", err)
	}
	h.noJob("elsewhere", "resize")
	c1 := h.claimJob(ws, "resize", "w1")
	equal(t, "claimed job", c1.ID, w.ID)
	equal(t, "tries", c1.Tries, 1)
	equal(t, "leased_by", c1.LeasedBy, "w1")
	jsonEqual(t, "input", c1.Input, `{"n":1}`)
	if c1.LeaseToken == "" || c1.LeaseUntil.IsZero() || c1.Status != starflowtype.JobRunning {
		t.Fatalf("claim %+v: want a running job with a token and a lease", c1)
	}
	h.noJob(ws, "resize")
	polled, err := h.a.JobPollers(h.ctx(), &state.JobPollersParams{WorkspaceID: ws, Types: []string{"resize"}})
	if err != nil || len(polled) != 1 || polled[0].Worker != "w1" {
		t.Fatalf("JobPollers = %+v, %v; want w1", polled, err)
	}

	// Heartbeat: the token fences it.
	_, err = h.a.HeartbeatJob(h.ctx(), &state.HeartbeatJobParams{ID: c1.ID, Token: "not-the-token"})
	wantLeaseLost(t, "heartbeat with another token", err)
	hb, err := h.a.HeartbeatJob(h.ctx(), &state.HeartbeatJobParams{ID: c1.ID, Token: c1.LeaseToken})
	if err != nil {
		t.Fatal(err)
	}
	if hb.LeaseUntil.Before(c1.LeaseUntil) {
		t.Errorf("heartbeat moved the lease back: %v before %v", hb.LeaseUntil, c1.LeaseUntil)
	}

	// A retryable failure with a try left: queued again, a new claim.
	f1, err := h.a.FailJob(h.ctx(), &state.FailJobParams{ID: c1.ID, Token: c1.LeaseToken, Retry: true,
		Error: starflowtype.ErrorInfo{Type: "quota", Message: "over quota"}})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "job after a retried failure", f1.Status, starflowtype.JobQueued)
	h.wantWait(w.ID, starflowtype.WaitPending, "")
	time.Sleep(20 * time.Millisecond) // the 1 ms backoff, at the database's clock
	c2 := h.claimJob(ws, "resize", "w2")
	equal(t, "tries of the second claim", c2.Tries, 2)
	equal(t, "epoch of the second claim", c2.LeaseEpoch, c1.LeaseEpoch+1)
	_, err = h.a.CompleteJob(h.ctx(), &state.CompleteJobParams{ID: c1.ID, Token: c1.LeaseToken, Output: json.RawMessage(`1`)})
	wantLeaseLost(t, "completion with the first claim's token", err)
	done, err := h.a.CompleteJob(h.ctx(), &state.CompleteJobParams{ID: c2.ID, Token: c2.LeaseToken, Output: json.RawMessage(`{"size":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "completed job", done.Status, starflowtype.JobSucceeded)
	h.wantWait(w.ID, starflowtype.WaitWoken, `{"output":{"size":3}}`)
	h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
	_, err = h.a.CompleteJob(h.ctx(), &state.CompleteJobParams{ID: c2.ID, Token: c2.LeaseToken, Output: json.RawMessage(`2`)})
	wantLeaseLost(t, "a second completion", err)
	h.claimStartOwn(run.ID, runnerA) // the woken run resumes: nothing of it is queued any more
	if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: h.getRun(run.ID).Lease()}); err != nil {
		t.Fatal(err)
	}

	// A final failure wakes the wait with the error.
	run2, l2 := h.startOwn(runnerA)
	k2 := stepKey(run2, "", "send")
	h.pause(k2, l2)
	w2 := h.register(jobWait(k2, l2, "send", leaseTTL))
	h.park(run2.ID, l2)
	c := h.claimJob(ws, "send", "w1")
	f, err := h.a.FailJob(h.ctx(), &state.FailJobParams{ID: c.ID, Token: c.LeaseToken, Retry: false,
		Error: starflowtype.ErrorInfo{Type: "bounced", Message: "mailbox full", Details: map[string]any{"code": 552}}})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "job after a final failure", f.Status, starflowtype.JobFailed)
	equal(t, "job error", f.Error, "mailbox full")
	h.wantWait(w2.ID, starflowtype.WaitWoken, `{"error":{"type":"bounced","message":"mailbox full","details":{"code":552}}}`)
	h.wantClaim(run2.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
	r2, rl2 := h.claimStartOwn(run2.ID, runnerA)
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r2.ID, Lease: rl2, Error: "mailbox full"}); err != nil {
		t.Fatal(err)
	}

	// An expired lease: queued again (a try), then failed with a timeout.
	run3, l3 := h.startOwn(runnerA)
	k3 := stepKey(run3, "", "slow")
	h.pause(k3, l3)
	w3 := h.register(jobWait(k3, l3, "slow", 50*time.Millisecond))
	h.park(run3.ID, l3)
	for try := 1; try <= 2; try++ {
		c := h.claimJob(ws, "slow", "w1")
		equal(t, "tries", c.Tries, try)
		var changed []*starflowtype.WorkerJob
		eventually(t, "the job's lease to expire", func() bool {
			var err error
			changed, err = h.a.ExpireJobLeases(h.ctx(), &state.ExpireJobLeasesParams{})
			return err == nil && len(changed) == 1
		})
		want := starflowtype.JobQueued
		if try == 2 {
			want = starflowtype.JobFailed
		}
		equal(t, "job after its lease expired", changed[0].Status, want)
		_, err := h.a.CompleteJob(h.ctx(), &state.CompleteJobParams{ID: c.ID, Token: c.LeaseToken})
		wantLeaseLost(t, "completion after the lease expired", err)
		time.Sleep(10 * time.Millisecond)
	}
	ww := h.wait(w3.ID)
	equal(t, "wait of the expired job", ww.Status, starflowtype.WaitWoken)
	if e, _ := jsonObject(t, ww.Payload)["error"].(map[string]any); e["type"] != "timeout" {
		t.Errorf("wake payload %s, want a timeout error", ww.Payload)
	}
	r3, rl3 := h.claimStartOwn(run3.ID, runnerA)
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r3.ID, Lease: rl3, Error: "timeout"}); err != nil {
		t.Fatal(err)
	}

	// The run's end cancels its job: the worker holding it is refused.
	run4, l4 := h.startOwn(runnerA)
	k4 := stepKey(run4, "", "held")
	h.pause(k4, l4)
	w4 := h.register(jobWait(k4, l4, "held", leaseTTL))
	c4 := h.claimJob(ws, "held", "w1")
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run4.ID, Lease: l4, Error: "gave up"}); err != nil {
		t.Fatal(err)
	}
	h.wantWait(w4.ID, starflowtype.WaitCancelled, "")
	j4, _ := h.a.GetJob(h.ctx(), &state.GetJobParams{ID: c4.ID})
	equal(t, "job of an ended run", j4.Status, starflowtype.JobCancelled)
	_, err = h.a.HeartbeatJob(h.ctx(), &state.HeartbeatJobParams{ID: c4.ID, Token: c4.LeaseToken})
	wantLeaseLost(t, "heartbeat of a cancelled job", err)

	// A job completed while its runner died (before ParkRun): the sweep
	// gives the result back to the inbox, and the next attempt's job step
	// takes it instead of queueing a second job.
	run5 := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3})
	l5 := h.claimExpired(run5.ID)
	r5 := h.getRun(run5.ID)
	k5 := stepKey(r5, "", "once")
	h.pause(k5, l5)
	w5 := h.register(jobWait(k5, l5, "once", leaseTTL))
	c5 := h.claimJob(ws, "once", "w1")
	if _, err := h.a.CompleteJob(h.ctx(), &state.CompleteJobParams{ID: c5.ID, Token: c5.LeaseToken, Output: json.RawMessage(`"done"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{}); err != nil {
		t.Fatal(err)
	}
	h.wantWait(w5.ID, starflowtype.WaitWoken, `{"output":"done"}`)
	r6, l6 := h.claimStartOwn(run5.ID, runnerB)
	equal(t, "attempt", r6.Attempt, 2)
	k6 := stepKey(r6, "", "once")
	h.pause(k6, l6)
	w6 := h.register(jobWait(k6, l6, "once", leaseTTL))
	equal(t, "next attempt's job wait (its result came back from the inbox)", w6.Status, starflowtype.WaitWoken)
	jsonEqual(t, "payload", w6.Payload, `{"output":"done"}`)
	if _, err := h.a.GetJob(h.ctx(), &state.GetJobParams{ID: w6.ID}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("a second job was written for a step whose result came from the inbox: %v", err)
	}
	h.noJob(ws, "once")
}
