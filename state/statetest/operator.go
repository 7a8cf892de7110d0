package statetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testOperator: CancelRun, the cancel request seen at the next step
// boundary, OnRunCancelled, and RequeueRun (resume / retrigger).
func (s *suite) testOperator(t *testing.T) {
	t.Run("CancelQueued", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(nil)
		c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: r.ID})
		if err != nil || c.Status != starflowtype.RunCancelled || c.CompletedAt.IsZero() {
			t.Fatalf("CancelRun of a queued run: %+v %v", c, err)
		}
		if got := h.claim(runnerA); got != nil {
			t.Fatalf("a cancelled run was claimed: %+v", got)
		}
		if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: r.ID}); !errors.Is(err, starflowtype.ErrConflict) {
			t.Fatalf("cancel of an ended run: %v, want ErrConflict", err)
		}
		if !hasEvent(h.events(r.ID), starflowtype.EventRunCancelled) {
			t.Fatal("no run_cancelled event")
		}
	})
	t.Run("CancelRunningAtStepBoundary", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r, l := h.started(nil, runnerA)
		h.nodeStart(stepKey(r, "", "a"), l, 1)
		c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: r.ID})
		if err != nil || c.Status != starflowtype.RunRunning || !c.CancelRequested {
			t.Fatalf("CancelRun of a running run: %+v %v", c, err)
		}
		// The step in flight may still complete; the next one may not start.
		h.nodeComplete(stepKey(r, "", "a"), l, `1`, `{}`)
		err = h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: stepKey(r, "", "b"), Lease: l, Kind: "k", Try: 1})
		if !errors.Is(err, starflowtype.ErrCancelRequested) {
			t.Fatalf("OnNodeStart after a cancel request: %v, want ErrCancelRequested", err)
		}
		if steps := h.steps(r.ID, 0); len(steps) != 1 {
			t.Fatalf("the refused start wrote a step row: %+v", steps)
		}
		done, err := h.a.OnRunCancelled(h.ctx(), &state.RunCancelledParams{RunID: r.ID, Lease: l})
		if err != nil || done.Status != starflowtype.RunCancelled || done.LeasedBy != "" {
			t.Fatalf("OnRunCancelled: %+v %v", done, err)
		}
	})
	t.Run("Requeue", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r, l := h.started(&state.EnqueueRunParams{MaxAttempts: 1}, runnerA)
		if _, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: r.ID, Reason: "resume"}); !errors.Is(err, starflowtype.ErrConflict) {
			t.Fatalf("requeue of a running run: %v, want ErrConflict", err)
		}
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom", Retry: true}); err != nil {
			t.Fatal(err)
		}
		failed := h.getRun(r.ID)
		if failed.Status != starflowtype.RunFailed || !failed.DeadLettered {
			t.Fatalf("setup: %+v", failed)
		}
		q, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: r.ID, Reason: "resume", RecoveryMode: starflowtype.RecoveryResume})
		if err != nil {
			t.Fatal(err)
		}
		if q.Status != starflowtype.RunQueued || q.ClaimState != starflowtype.ClaimQueued || q.Attempt != 2 || q.MaxAttempts < 2 ||
			q.DeadLettered || q.Error != "" || q.RecoveryMode != starflowtype.RecoveryResume || !q.CompletedAt.IsZero() {
			t.Fatalf("after RequeueRun: %+v", q)
		}
		c := h.claimID(r.ID, runnerB)
		if c.LeaseEpoch != 2 {
			t.Fatalf("epoch %d after the re-claim", c.LeaseEpoch)
		}
		if _, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: "00000000-0000-0000-0000-000000000000", Reason: "retrigger"}); !errors.Is(err, starflowtype.ErrNotFound) {
			t.Fatalf("requeue of a missing run: %v", err)
		}
	})
}

// testJSONKeptAsWritten: checkpoint, input and output JSON come back as
// written — number spelling (1e+06 is a double, 1000000 an int), key
// order, \u0000 inside strings — so restored values keep their types.
func (s *suite) testJSONKeptAsWritten(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	const doc = `{"b":1e+06,"a":"x\u0000y","c":1000000.0,"d":[2.50,1]}`
	r, l := h.started(&state.EnqueueRunParams{Input: []byte(doc)}, runnerA)
	k := stepKey(r, "", "a")
	h.runStep(k, l, doc, doc)
	cps, err := h.a.ListCheckpoints(h.ctx(), &state.ListCheckpointsParams{RunID: r.ID})
	if err != nil || len(cps) != 1 {
		t.Fatalf("ListCheckpoints: %v %v", cps, err)
	}
	if string(cps[0].Output) != doc || string(cps[0].Context) != doc {
		t.Fatalf("checkpoint JSON changed:\n got %s\n     %s\nwant %s", cps[0].Output, cps[0].Context, doc)
	}
	if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: r.ID, Lease: l, Output: []byte(doc)}); err != nil {
		t.Fatal(err)
	}
	got := h.getRun(r.ID)
	if string(got.Input) != doc || string(got.Output) != doc {
		t.Fatalf("run JSON changed:\n input  %s\n output %s\n want   %s", got.Input, got.Output, doc)
	}
}

// testBlobs: a checkpoint output or context larger than the blob threshold
// (256 KiB by default) reads back whole (it is stored once by sha256 and
// referenced from the checkpoint row).
func (s *suite) testBlobs(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	r, l := h.started(nil, runnerA)
	big := `{"data":"` + strings.Repeat("x", state.BlobThresholdDefault+10) + `"}`
	for i, id := range []string{"a", "b"} { // the same value twice: one blob
		k := stepKey(r, "", id)
		h.nodeStart(k, l, 1)
		h.nodeComplete(k, l, big, big)
		cps, err := h.a.ListCheckpoints(h.ctx(), &state.ListCheckpointsParams{RunID: r.ID})
		if err != nil || len(cps) != i+1 {
			t.Fatalf("ListCheckpoints: %d %v", len(cps), err)
		}
		if string(cps[i].Output) != big || string(cps[i].Context) != big {
			t.Fatalf("large checkpoint %s read back as %d/%d bytes, want %d", id, len(cps[i].Output), len(cps[i].Context), len(big))
		}
	}

	// Another run's step whose output and context delta are shaped like
	// the reference to that blob (byte for byte what a store writes) reads
	// back as written: only the store's blob column marks a reference
	// (issue 10 item 3), so the forged one reaches no other run's data.
	forged, _ := state.BlobRef([]byte(big))
	r2, l2 := h.started(nil, runnerB)
	k := stepKey(r2, "", "forger")
	h.nodeStart(k, l2, 1)
	h.nodeComplete(k, l2, string(forged), string(forged))
	cps, err := h.a.ListCheckpoints(h.ctx(), &state.ListCheckpointsParams{RunID: r2.ID})
	if err != nil || len(cps) != 1 {
		t.Fatalf("ListCheckpoints: %d %v", len(cps), err)
	}
	if string(cps[0].Output) != string(forged) || string(cps[0].Context) != string(forged) {
		t.Fatalf("a step output shaped like a blob reference was dereferenced: read back %d/%d bytes, want the %d bytes written",
			len(cps[0].Output), len(cps[0].Context), len(forged))
	}
}
