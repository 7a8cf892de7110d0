package statetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testSteps: the ledger rows, events and checkpoints of a step's lifecycle.
func (s *suite) testSteps(t *testing.T) {
	t.Parallel()

	t.Run("StartRetryComplete", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "", "reserve")
		mark := h.lastEventID(run.ID)

		// Try 1 starts.
		if err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: l, Kind: "service_call", Try: 1,
			Payload: json.RawMessage(`{"url":"https://example.test"}`)}); err != nil {
			t.Fatalf("OnNodeStart: %v", err)
		}
		st := h.step(k)
		equal(t, "status after start", st.Status, starflowtype.StepRunning)
		equal(t, "tries after start", st.Tries, 1)
		equal(t, "kind", st.Kind, "service_call")
		if st.StartedAt.IsZero() {
			t.Error("started_at not set")
		}
		near(t, "updated_at after start (the row's last write)", st.UpdatedAt, st.StartedAt, 0)
		evs := h.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeStart)
		if len(evs) == 1 {
			equal(t, "node_start node_id", evs[0].NodeID, "reserve")
			equal(t, "node_start scope_path", evs[0].ScopePath, "")
			equal(t, "node_start attempt", evs[0].Attempt, 1)
			wantTry(t, evs[0], 1)
		}

		// Try 1 fails and will be retried.
		if err := h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: k, Lease: l, Try: 1, Error: "503 from inventory", Backoff: time.Second}); err != nil {
			t.Fatalf("OnNodeRetry: %v", err)
		}
		st = h.step(k)
		equal(t, "status after retry", st.Status, starflowtype.StepRunning)
		equal(t, "tries after retry", st.Tries, 1)
		equal(t, "error after retry", st.Error, "503 from inventory")
		if st.UpdatedAt.Before(st.StartedAt) {
			t.Errorf("updated_at %v after the retry, before started_at %v", st.UpdatedAt, st.StartedAt)
		}
		evs = h.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeStart, starflowtype.EventNodeRetry)
		if len(evs) == 2 {
			wantTry(t, evs[1], 1)
			equal(t, "node_retry node_id", evs[1].NodeID, "reserve")
		}

		// Try 2 starts and succeeds.
		h.nodeStart(k, l, 2)
		st = h.step(k)
		equal(t, "tries after second start", st.Tries, 2)
		equal(t, "status after second start", st.Status, starflowtype.StepRunning)
		err := h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: k, Lease: l, Try: 2,
			Output: json.RawMessage(`{"status":200,"body":{"id":"r-1"}}`), Context: json.RawMessage(`{"reservation":"r-1"}`)})
		if err != nil {
			t.Fatalf("OnNodeComplete: %v", err)
		}
		st = h.step(k)
		equal(t, "status after complete", st.Status, starflowtype.StepSucceeded)
		equal(t, "tries after complete", st.Tries, 2)
		equal(t, "error after complete", st.Error, "")
		if st.FinishedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) {
			t.Errorf("finished_at %v, started_at %v", st.FinishedAt, st.StartedAt)
		}
		if st.DurationMS < 0 {
			t.Errorf("duration_ms = %d", st.DurationMS)
		}
		near(t, "updated_at after complete", st.UpdatedAt, st.FinishedAt, 0)
		evs = h.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeStart, starflowtype.EventNodeRetry,
			starflowtype.EventNodeStart, starflowtype.EventNodeComplete)
		if len(evs) == 4 {
			wantTry(t, evs[2], 2)
			wantTry(t, evs[3], 2)
			equal(t, "node_complete node_id", evs[3].NodeID, "reserve")
		}

		cps := h.checkpoints(run.ID, 0)
		if len(cps) != 1 {
			t.Fatalf("checkpoints = %s, want one", dump(cps))
		}
		cp := cps[0]
		equal(t, "checkpoint run_id", cp.RunID, run.ID)
		equal(t, "checkpoint step_id", cp.StepID, "reserve")
		equal(t, "checkpoint scope_path", cp.ScopePath, "")
		equal(t, "checkpoint attempt", cp.Attempt, 1)
		jsonEqual(t, "checkpoint output", cp.Output, `{"status":200,"body":{"id":"r-1"}}`)
		jsonEqual(t, "checkpoint context", cp.Context, `{"reservation":"r-1"}`)
		if cp.CreatedAt.IsZero() {
			t.Error("checkpoint created_at not set")
		}
	})

	t.Run("CheckpointPerSucceededStep", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		succeeded := []state.StepKey{
			stepKey(run, "", "a"),
			stepKey(run, "fanout.lane_fast", "b"),
			stepKey(run, "fanout.lane_slow", "b"),
			stepKey(run, "ship.item_0/poll.iter_1", "c"),
		}
		for i, k := range succeeded {
			h.runStep(k, l, fmt.Sprintf(`{"i":%d}`, i), `{}`)
		}
		skipped := stepKey(run, "", "d")
		if err := h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: skipped, Lease: l, Kind: "service_call", Reason: "when was false"}); err != nil {
			t.Fatalf("OnNodeSkipped: %v", err)
		}
		failed := stepKey(run, "", "e")
		h.nodeStart(failed, l, 1)
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: failed, Lease: l, Kind: "context_set", Try: 1, Error: "boom"}); err != nil {
			t.Fatalf("OnNodeError: %v", err)
		}

		cps := h.checkpoints(run.ID, run.Attempt)
		n := 0
		for _, st := range h.steps(run.ID, run.Attempt) {
			if st.Status == starflowtype.StepSucceeded {
				n++
			}
		}
		equal(t, "succeeded steps", n, len(succeeded))
		equal(t, "checkpoints", len(cps), n)
		for i, k := range succeeded {
			if i < len(cps) && (cps[i].ScopePath != k.ScopePath || cps[i].StepID != k.StepID) {
				t.Errorf("checkpoint %d is %s/%s, want %s/%s (creation order)", i, cps[i].ScopePath, cps[i].StepID, k.ScopePath, k.StepID)
			}
		}
		st := h.steps(run.ID, 0)
		if len(st) != 6 {
			t.Fatalf("steps = %s, want 6", dump(st))
		}
		for i, k := range append(succeeded, skipped, failed) {
			if st[i].ScopePath != k.ScopePath || st[i].StepID != k.StepID {
				t.Errorf("step row %d is %s/%s, want %s/%s (start order)", i, st[i].ScopePath, st[i].StepID, k.ScopePath, k.StepID)
			}
		}
	})

	t.Run("Skipped", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "fanout.lane_a", "charge")
		mark := h.lastEventID(run.ID)
		if err := h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: k, Lease: l, Kind: "service_call", Reason: "when was false"}); err != nil {
			t.Fatalf("OnNodeSkipped: %v", err)
		}
		st := h.step(k)
		equal(t, "status", st.Status, starflowtype.StepSkipped)
		equal(t, "kind", st.Kind, "service_call")
		equal(t, "checkpoints", len(h.checkpoints(run.ID, 0)), 0)
		evs := h.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeSkipped)
		if len(evs) == 1 {
			equal(t, "node_skipped node_id", evs[0].NodeID, "charge")
			equal(t, "node_skipped scope_path", evs[0].ScopePath, "fanout.lane_a")
		}
	})

	t.Run("SkippedTwiceWritesOnce", func(t *testing.T) {
		t.Parallel()
		// A run continued after a durable wait re-evaluates a skipped step
		// in the same attempt: the second OnNodeSkipped writes nothing.
		rec := newRecorder(t, false)
		h := s.stored(t, rec.hook)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "ship.item_0", "small")
		mark := h.lastEventID(run.ID)
		skip := func() error {
			return h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: k, Lease: l, Kind: "context_set", Reason: "when was false"})
		}
		if err := skip(); err != nil {
			t.Fatalf("first OnNodeSkipped: %v", err)
		}
		if ch := rec.last("OnNodeSkipped"); len(ch.Events) != 1 || len(ch.Steps) != 1 {
			t.Errorf("first OnNodeSkipped change: %d events, %d steps, want 1 and 1", len(ch.Events), len(ch.Steps))
		}
		first := h.step(k)
		hookCalls := func() int { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.changes) }
		hooksBefore := hookCalls()
		if err := skip(); err != nil {
			t.Fatalf("second OnNodeSkipped of a skipped step: %v (want nil)", err)
		}
		if n := hookCalls() - hooksBefore; n != 0 {
			t.Errorf("second OnNodeSkipped ran the hooks %d times, want none (nothing was written)", n)
		}
		wantEventTypes(t, h.eventsAfter(run.ID, mark), starflowtype.EventNodeSkipped)
		if st := h.step(k); !reflect.DeepEqual(st, first) {
			t.Errorf("second OnNodeSkipped changed the step row:\nbefore %+v\nafter  %+v", first, st)
		}
		equal(t, "step rows", len(h.steps(run.ID, 0)), 1)
		equal(t, "checkpoints", len(h.checkpoints(run.ID, 0)), 0)
	})

	t.Run("Error", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "", "charge")
		h.nodeStart(k, l, 1)
		mark := h.lastEventID(run.ID)
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k, Lease: l, Kind: "service_call", Try: 3, Error: "402 payment required"}); err != nil {
			t.Fatalf("OnNodeError: %v", err)
		}
		st := h.step(k)
		equal(t, "status", st.Status, starflowtype.StepFailed)
		equal(t, "error", st.Error, "402 payment required")
		equal(t, "tries", st.Tries, 3)
		if st.FinishedAt.IsZero() {
			t.Error("finished_at not set")
		}
		equal(t, "checkpoints", len(h.checkpoints(run.ID, 0)), 0)
		evs := h.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeError)
		if len(evs) == 1 {
			equal(t, "node_error node_id", evs[0].NodeID, "charge")
			wantTry(t, evs[0], 3)
		}
	})

	t.Run("ErrorBeforeStart", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "", "charge")
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k, Lease: l, Kind: "service_call", Try: 1, Error: "input did not evaluate"}); err != nil {
			t.Fatalf("OnNodeError of a step that never started: %v", err)
		}
		st := h.step(k)
		equal(t, "status", st.Status, starflowtype.StepFailed)
		equal(t, "kind", st.Kind, "service_call")
		equal(t, "error", st.Error, "input did not evaluate")
	})

	t.Run("SucceededStepIsFinal", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		done := stepKey(run, "fanout.lane_a", "done")
		h.runStep(done, l, `1`, `{"a":1}`)

		// Within one attempt a succeeded step has its checkpoint, so it
		// stays succeeded: any further write about it is refused with
		// ErrConflict and writes nothing, and the ledger never contradicts
		// the checkpoints.
		for _, w := range []struct {
			name string
			call func() error
		}{
			{"OnNodeStart", func() error {
				return h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: done, Lease: l, Kind: "context_set", Try: 2})
			}},
			{"OnNodeRetry", func() error {
				return h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: done, Lease: l, Try: 1, Error: "again"})
			}},
			{"OnNodeComplete", func() error {
				return h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: done, Lease: l, Try: 1, Output: json.RawMessage(`2`)})
			}},
			{"OnNodeError", func() error {
				return h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: done, Lease: l, Kind: "context_set", Try: 1, Error: "late"})
			}},
			{"OnNodeSkipped", func() error {
				return h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: done, Lease: l, Kind: "context_set"})
			}},
		} {
			before := h.snapshot(run.ID)
			err := w.call()
			wantErrIs(t, w.name+" on a succeeded step", err, starflowtype.ErrConflict)
			sameSnapshot(t, w.name+" on a succeeded step", before, h.snapshot(run.ID))
		}
	})

	t.Run("ContinuedAttemptRecordsAgain", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		skipped := stepKey(run, "", "skipped")
		failed := stepKey(run, "", "failed")
		broken := stepKey(run, "", "broken")
		if err := h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: skipped, Lease: l, Kind: "context_set", Reason: "when was false"}); err != nil {
			t.Fatal(err)
		}
		h.nodeStart(failed, l, 1)
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: failed, Lease: l, Kind: "context_set", Try: 1, Error: "caught by try"}); err != nil {
			t.Fatal(err)
		}
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: broken, Lease: l, Kind: "context_set", Error: "when did not evaluate"}); err != nil {
			t.Fatal(err)
		}

		// A graceful release: another runner continues the same attempt
		// and meets the same steps again. Only succeeded steps are restored
		// from checkpoints; these are recorded again.
		if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		run2, l2 := h.claimAndStart(run.ID, runnerB)
		equal(t, "attempt", run2.Attempt, run.Attempt)
		if err := h.a.OnNodeSkipped(h.ctx(), &state.NodeSkippedParams{StepKey: skipped, Lease: l2, Kind: "context_set", Reason: "when was false"}); err != nil {
			t.Errorf("OnNodeSkipped of a skipped step in a continued attempt: %v", err)
		}
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: broken, Lease: l2, Kind: "context_set", Error: "when did not evaluate"}); err != nil {
			t.Errorf("OnNodeError of a failed step in a continued attempt: %v", err)
		}
		// Started again in this attempt: its second try.
		h.nodeStart(failed, l2, 2)
		equal(t, "re-opened step status", h.step(failed).Status, starflowtype.StepRunning)
		equal(t, "re-opened step tries", h.step(failed).Tries, 2)
		if err := h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: failed, Lease: l2, Try: 2,
			Output: json.RawMessage(`"ok"`), Context: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("OnNodeComplete: %v", err)
		}
		equal(t, "re-run step status", h.step(failed).Status, starflowtype.StepSucceeded)
		equal(t, "skipped step status", h.step(skipped).Status, starflowtype.StepSkipped)
		equal(t, "broken step status", h.step(broken).Status, starflowtype.StepFailed)
		equal(t, "checkpoints", len(h.checkpoints(run.ID, 0)), 1)
	})

	t.Run("TryStartedOnce", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		k := stepKey(run, "", "charge")
		mark := h.lastEventID(run.ID)
		h.nodeStart(k, l, 1)

		// Try 1 again, or an earlier try: refused, nothing written.
		for _, try := range []int{1, 0} {
			before := h.snapshot(run.ID)
			err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: l, Kind: "context_set", Try: try})
			wantErrIs(t, fmt.Sprintf("OnNodeStart of try %d after try 1 started", try), err, starflowtype.ErrConflict)
			sameSnapshot(t, fmt.Sprintf("OnNodeStart of try %d after try 1 started", try), before, h.snapshot(run.ID))
		}

		// Cut off mid-flight: the lease is released and another runner
		// continues the same attempt. Its start is try 2, once.
		if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		run2, l2 := h.claimAndStart(run.ID, runnerB)
		equal(t, "attempt", run2.Attempt, run.Attempt)
		before := h.snapshot(run.ID)
		err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: l2, Kind: "context_set", Try: 1})
		wantErrIs(t, "OnNodeStart of try 1 by the continuing runner", err, starflowtype.ErrConflict)
		sameSnapshot(t, "OnNodeStart of try 1 by the continuing runner", before, h.snapshot(run.ID))
		h.nodeStart(k, l2, 2)
		st := h.step(k)
		equal(t, "status", st.Status, starflowtype.StepRunning)
		equal(t, "tries", st.Tries, 2)
		var starts []*starflowtype.Event
		for _, e := range h.eventsAfter(run.ID, mark) {
			if e.Type == starflowtype.EventNodeStart {
				starts = append(starts, e)
			}
		}
		if len(starts) != 2 {
			t.Fatalf("node_start events %s, want two", dump(starts))
		}
		wantTry(t, starts[0], 1)
		wantTry(t, starts[1], 2)
	})

	t.Run("EventsInOrder", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		for _, id := range []string{"a", "b", "c"} {
			h.runStep(stepKey(run, "", id), l, `null`, `{}`)
		}
		evs := h.events(run.ID) // checks that ids increase
		wantEventTypes(t, evs,
			starflowtype.EventRunQueued, starflowtype.EventRunClaimed, starflowtype.EventRunStarted,
			starflowtype.EventNodeStart, starflowtype.EventNodeComplete,
			starflowtype.EventNodeStart, starflowtype.EventNodeComplete,
			starflowtype.EventNodeStart, starflowtype.EventNodeComplete)
		var nodes []string
		for _, e := range evs {
			if e.NodeID != "" {
				nodes = append(nodes, e.NodeID)
			}
			equal(t, "event run_id", e.RunID, run.ID)
		}
		equal(t, "node order", dump(nodes), dump([]string{"a", "a", "b", "b", "c", "c"}))
	})
}
