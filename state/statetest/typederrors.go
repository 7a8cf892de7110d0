package statetest

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// typedError is the typed error object the cases store (an ErrorInfo's
// JSON, as the engine writes it).
const typedError = `{"type":"http","message":"inventory 503","step_id":"reserve","scope_path":"","status":503,"body":{"detail":"down"}}`

// wantErrorDetail fails unless r's ErrorDetail is the JSON value want
// ("" = none).
func wantErrorDetail(t *testing.T, what string, r *starflowtype.Run, want string) {
	t.Helper()
	if want == "" {
		if len(r.ErrorDetail) != 0 {
			t.Errorf("%s: error_detail = %s, want none", what, r.ErrorDetail)
		}
		return
	}
	jsonEqual(t, what+": error_detail", r.ErrorDetail, want)
}

// testTypedErrors: a run's typed error object (error_json) is written
// with its error by every end of OnRunError, read back by every run read,
// cleared wherever error is, and handed to a parent with a child's end;
// OnNodeError with Cancelled records a cancelled step row that a later
// try starts again (issue 14).
func (s *suite) testTypedErrors(t *testing.T) {
	t.Parallel()

	t.Run("RunErrorStoresObject", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			enq    state.EnqueueRunParams
			retry  bool
			status starflowtype.RunStatus
			claim  starflowtype.ClaimState
			// clear is the write after which the run has no error any
			// more (and no object with it).
			clear func(h *harness, r *starflowtype.Run) *starflowtype.Run
		}{
			{"Requeue", state.EnqueueRunParams{MaxAttempts: 3}, true, starflowtype.RunInterrupted, starflowtype.ClaimQueued,
				func(h *harness, r *starflowtype.Run) *starflowtype.Run {
					started, _ := h.claimStartOwn(r.ID, runnerB)
					return started
				}},
			{"Hold", state.EnqueueRunParams{RecoveryMode: starflowtype.RecoveryManual}, true, starflowtype.RunInterrupted, starflowtype.ClaimAbandoned,
				func(h *harness, r *starflowtype.Run) *starflowtype.Run { return h.requeue(r.ID, "resume") }},
			{"Failed", state.EnqueueRunParams{}, false, starflowtype.RunFailed, starflowtype.ClaimFailed,
				func(h *harness, r *starflowtype.Run) *starflowtype.Run { return h.requeue(r.ID, "retrigger") }},
			{"DeadLettered", state.EnqueueRunParams{MaxAttempts: 1}, true, starflowtype.RunFailed, starflowtype.ClaimFailed,
				func(h *harness, r *starflowtype.Run) *starflowtype.Run { return h.requeue(r.ID, "resume") }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := s.stored(t)
				run, l := h.claimStartOwn(h.enqueue(&tc.enq).ID, runnerA)
				got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "inventory 503",
					ErrorJSON: json.RawMessage(typedError), Retry: tc.retry})
				if err != nil {
					t.Fatalf("OnRunError: %v", err)
				}
				if got.Status != tc.status || got.ClaimState != tc.claim {
					t.Fatalf("OnRunError left the run %s/%s, want %s/%s", got.Status, got.ClaimState, tc.status, tc.claim)
				}
				equal(t, "error", got.Error, "inventory 503")
				wantErrorDetail(t, "OnRunError's run", got, typedError)
				wantErrorDetail(t, "GetRun", h.getRun(run.ID), typedError)
				listed, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{})
				if err != nil || len(listed) != 1 {
					t.Fatalf("ListRuns = %d runs, %v; want the run", len(listed), err)
				}
				wantErrorDetail(t, "ListRuns", listed[0], typedError)

				cleared := tc.clear(h, got)
				equal(t, "error after the error is cleared", cleared.Error, "")
				wantErrorDetail(t, "the write that clears the error", cleared, "")
				wantErrorDetail(t, "GetRun after the error is cleared", h.getRun(run.ID), "")
			})
		}
	})

	t.Run("NoObject", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		for _, none := range []string{"", "null"} {
			run, l := h.startOwn(runnerA)
			got, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "boom", ErrorJSON: json.RawMessage(none)})
			if err != nil {
				t.Fatalf("OnRunError with ErrorJSON %q: %v", none, err)
			}
			equal(t, "error", got.Error, "boom")
			wantErrorDetail(t, "ErrorJSON "+none, h.getRun(run.ID), "")
		}
		// Anything but a JSON object is refused, and nothing is written.
		run, l := h.startOwn(runnerA)
		for _, bad := range []string{`[1]`, `"boom"`, `{"type":`, `not json`} {
			before := h.snapshot(run.ID)
			_, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "boom", ErrorJSON: json.RawMessage(bad)})
			if err == nil {
				t.Errorf("OnRunError with ErrorJSON %s: no error, want a refusal", bad)
			}
			sameSnapshot(t, "OnRunError with ErrorJSON "+bad, before, h.snapshot(run.ID))
		}
	})

	t.Run("CompleteHasNone", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.startOwn(runnerA)
		got, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l, Output: json.RawMessage(`1`)})
		if err != nil {
			t.Fatal(err)
		}
		wantErrorDetail(t, "OnRunComplete", got, "")
	})

	// The sweep writes an error of its own (its reason) over a run whose
	// previous attempt left one: a run claimed but never started still
	// holds that attempt's error and object. The reason has no object.
	t.Run("SweepClearsObject", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name        string
			maxAttempts int
			status      starflowtype.RunStatus
		}{
			{"Requeued", 3, starflowtype.RunInterrupted},
			{"DeadLettered", 2, starflowtype.RunFailed},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := s.stored(t)
				run, l := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{MaxAttempts: tc.maxAttempts}).ID, runnerA)
				if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "inventory 503",
					ErrorJSON: json.RawMessage(typedError), Retry: true}); err != nil {
					t.Fatal(err)
				}
				c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runnerB, LeaseTTL: -time.Second, RunID: run.ID})
				if err != nil || c == nil {
					t.Fatalf("ClaimRun with an expired lease = %+v, %v", c, err)
				}
				wantErrorDetail(t, "claimed, not started", c, typedError)
				if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{}); err != nil {
					t.Fatalf("ExpireOldLeases: %v", err)
				}
				got := h.getRun(run.ID)
				equal(t, "status", got.Status, tc.status)
				equal(t, "error", got.Error, "runner_lost")
				wantErrorDetail(t, "after the sweep", got, "")
			})
		}
	})

	t.Run("ChildErrorReachesParent", func(t *testing.T) {
		t.Parallel()
		// childFails ends child (started with cl) as failed with the typed
		// error, or without an object when detail is "".
		childFails := func(h *harness, child string, cl starflowtype.Lease, detail string) {
			h.t.Helper()
			if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: child, Lease: cl, Error: "inventory 503",
				ErrorJSON: json.RawMessage(detail)}); err != nil {
				h.t.Fatalf("OnRunError of the child: %v", err)
			}
		}
		// wantPayload fails unless payload is the child's end with the
		// typed error ("" = without error_detail).
		wantPayload := func(t *testing.T, what string, payload json.RawMessage, child, detail string) {
			t.Helper()
			p := jsonObject(t, payload)
			keys := []string{"error", "output", "run_id", "status"}
			if detail != "" {
				keys = append(keys, "error_detail")
				slices.Sort(keys)
			}
			if got := slices.Sorted(maps.Keys(p)); !slices.Equal(got, keys) {
				t.Errorf("%s: payload %s has keys %v, want %v", what, payload, got, keys)
			}
			equal(t, what+": run_id", p["run_id"], any(child))
			equal(t, what+": status", p["status"], any("failed"))
			equal(t, what+": error", p["error"], any("inventory 503"))
			if detail != "" {
				jsonEqual(t, what+": error_detail", mustJSON(p["error_detail"]), detail)
			}
		}
		for _, detail := range []string{typedError, ""} {
			name := "WithObject"
			if detail == "" {
				name = "WithoutObject"
			}
			t.Run(name+"/WaitFirst", func(t *testing.T) {
				t.Parallel()
				h := s.durableWaits(t)
				parent, pl := h.startOwn(runnerA)
				child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
				_, cl := h.claimStartOwn(child.ID, runnerB)
				w, _ := h.waitOn(stepKey(parent, "", "call"), pl, state.RegisterWaitParams{Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
				childFails(h, child.ID, cl, detail)
				wantPayload(t, "woken wait", h.wantWait(w.ID, starflowtype.WaitWoken, "").Payload, child.ID, detail)
			})
			t.Run(name+"/Inbox", func(t *testing.T) {
				t.Parallel()
				h := s.durableWaits(t)
				parent, pl := h.startOwn(runnerA)
				child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
				_, cl := h.claimStartOwn(child.ID, runnerB)
				// The parent is still running: the end goes to its inbox,
				// and the wait registered later consumes that row.
				childFails(h, child.ID, cl, detail)
				k := stepKey(parent, "", "call")
				h.pause(k, pl)
				w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: pl, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
				equal(t, "wait registered after the end", w.Status, starflowtype.WaitWoken)
				wantPayload(t, "inbox row", w.Payload, child.ID, detail)
			})
			t.Run(name+"/FromItsRow", func(t *testing.T) {
				t.Parallel()
				h := s.durableWaits(t)
				parent, pl := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{MaxAttempts: 1}).ID, runnerA)
				child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
				_, cl := h.claimStartOwn(child.ID, runnerB)
				// The parent ends first: the child's end reaches no one,
				// and a later attempt's wait reads it from the child's row.
				if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: parent.ID, Lease: pl, Error: "other lane"}); err != nil {
					t.Fatal(err)
				}
				childFails(h, child.ID, cl, detail)
				h.requeue(parent.ID, "retrigger")
				p2, pl2 := h.claimStartOwn(parent.ID, runnerA)
				k := stepKey(p2, "", "call")
				h.pause(k, pl2)
				w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: pl2, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
				equal(t, "wait for the ended child", w.Status, starflowtype.WaitWoken)
				wantPayload(t, "child's row", w.Payload, child.ID, detail)
			})
		}
	})

	t.Run("CancelledStep", func(t *testing.T) {
		t.Parallel()
		for _, hooked := range []bool{false, true} {
			name := "NoHooks"
			if hooked {
				name = "Hooks" // the writes read their rows back (RETURNING)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var rec *recorder
				var h *harness
				if hooked {
					rec = newRecorder(t, false)
					h = s.stored(t, rec.hook)
				} else {
					h = s.stored(t)
				}
				run, l := h.startOwn(runnerA)
				k := stepKey(run, "race.lane_b", "fetch")
				h.nodeStart(k, l, 1)
				mark := h.lastEventID(run.ID)
				if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k, Lease: l, Kind: "service_call", Try: 1,
					Error: "lane lost the race", Cancelled: true}); err != nil {
					t.Fatalf("OnNodeError(Cancelled): %v", err)
				}
				st := h.step(k)
				equal(t, "status", st.Status, starflowtype.StepCancelled)
				equal(t, "error", st.Error, "lane lost the race")
				equal(t, "tries", st.Tries, 1)
				if st.FinishedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) || st.DurationMS < 0 {
					t.Errorf("finished_at %v, started_at %v, duration_ms %d", st.FinishedAt, st.StartedAt, st.DurationMS)
				}
				evs := h.eventsAfter(run.ID, mark)
				wantEventTypes(t, evs, starflowtype.EventNodeError)
				if len(evs) == 1 {
					jsonEqual(t, "node_error payload", evs[0].Payload, `{"try":1,"error":"lane lost the race","cancelled":true}`)
				}
				if hooked {
					ch := rec.last(state.OpNodeError)
					if len(ch.Steps) != 1 || ch.Steps[0].Status != starflowtype.StepCancelled {
						t.Errorf("Change.Steps = %s, want the cancelled row", dump(ch.Steps))
					}
				}

				// A later try starts it again, as it does a failed row;
				// the try it ended is not started twice.
				err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: l, Kind: "service_call", Try: 1})
				wantErrIs(t, "OnNodeStart of the cancelled try again", err, starflowtype.ErrConflict)
				h.nodeStart(k, l, 2)
				st = h.step(k)
				equal(t, "status after try 2 started", st.Status, starflowtype.StepRunning)
				equal(t, "tries after try 2 started", st.Tries, 2)
				equal(t, "error after try 2 started", st.Error, "")

				// A step cancelled before it started gets a cancelled row.
				k2 := stepKey(run, "race.lane_c", "fetch")
				if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k2, Lease: l, Kind: "service_call", Try: 1,
					Error: "lane lost the race", Cancelled: true}); err != nil {
					t.Fatalf("OnNodeError(Cancelled) of a step that never started: %v", err)
				}
				equal(t, "unstarted step status", h.step(k2).Status, starflowtype.StepCancelled)
				equal(t, "unstarted step kind", h.step(k2).Kind, "service_call")
				// A failure recorded without Cancelled is still failed.
				k3 := stepKey(run, "race.lane_d", "fetch")
				h.nodeStart(k3, l, 1)
				if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k3, Lease: l, Kind: "service_call", Try: 1, Error: "503"}); err != nil {
					t.Fatal(err)
				}
				equal(t, "failed step status", h.step(k3).Status, starflowtype.StepFailed)
				evs = h.events(run.ID)
				if last := evs[len(evs)-1]; payloadField(t, last, "cancelled") != nil {
					t.Errorf("node_error of a failure: payload %s, want no cancelled", last.Payload)
				}

				// An operator's cancel of the run is another thing: the
				// step's cancel is still recorded, and the next start is
				// refused (RefuseCancelled is about the run's request).
				k4 := stepKey(run, "race.lane_e", "fetch")
				h.nodeStart(k4, l, 1)
				if c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: run.ID}); err != nil || !c.CancelRequested {
					t.Fatalf("CancelRun = %+v, %v; want a request", c, err)
				}
				if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: k4, Lease: l, Kind: "service_call", Try: 1,
					Error: "lane lost the race", Cancelled: true}); err != nil {
					t.Fatalf("OnNodeError(Cancelled) after a cancel request: %v", err)
				}
				equal(t, "step cancelled after the request", h.step(k4).Status, starflowtype.StepCancelled)
				err = h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k4, Lease: l, Kind: "service_call", Try: 2})
				wantErrIs(t, "OnNodeStart after the run's cancel request", err, starflowtype.ErrCancelRequested)
			})
		}
	})
}

// requeue is an operator's resume or retrigger of run id.
func (h *harness) requeue(id, reason string) *starflowtype.Run {
	h.t.Helper()
	r, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: id, Reason: reason})
	if err != nil {
		h.t.Fatalf("RequeueRun(%s, %s): %v", id, reason, err)
	}
	return r
}
