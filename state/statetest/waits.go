package statetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// shortWait is the timer and timeout of the poller cases: short, and
// polled for with eventually.
const shortWait = 50 * time.Millisecond

// claimOwn claims run id (by id) for runner.
func (h *harness) claimOwn(id, runner string) *starflowtype.Run {
	h.t.Helper()
	c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: runner, LeaseTTL: leaseTTL, RunID: id})
	if err != nil || c == nil {
		h.t.Fatalf("ClaimRun(RunID %s) = %+v, %v", id, c, err)
	}
	return c
}

// claimStartOwn claims run id (by id) for runner and starts it.
func (h *harness) claimStartOwn(id, runner string) (*starflowtype.Run, starflowtype.Lease) {
	h.t.Helper()
	c := h.claimOwn(id, runner)
	run, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: id, Lease: c.Lease()})
	if err != nil {
		h.t.Fatalf("OnRunStart(%s): %v", id, err)
	}
	return run, c.Lease()
}

// startOwn enqueues a run and claims exactly that run (other runs of the
// case may be queued, woken ones included) for runner, then starts it.
func (h *harness) startOwn(runner string) (*starflowtype.Run, starflowtype.Lease) {
	h.t.Helper()
	return h.claimStartOwn(h.enqueue(nil).ID, runner)
}

// pause is commit boundary 1 for step k: OnRunPaused with a snapshot.
func (h *harness) pause(k state.StepKey, l starflowtype.Lease) {
	h.t.Helper()
	err := h.a.OnRunPaused(h.ctx(), &state.RunPausedParams{StepKey: k, Lease: l, Kind: "wait",
		Snapshot: json.RawMessage(`{"order":"o-1"}`), Phase: "waiting"})
	if err != nil {
		h.t.Fatalf("OnRunPaused(%s/%s): %v", k.ScopePath, k.StepID, err)
	}
}

// register is commit boundary 2.
func (h *harness) register(p *state.RegisterWaitParams) *starflowtype.Wait {
	h.t.Helper()
	if p.Kind == "" {
		p.Kind = starflowtype.WaitSignal
	}
	w, err := h.a.RegisterWait(h.ctx(), p)
	if err != nil {
		h.t.Fatalf("RegisterWait(%s): %v", p.StepID, err)
	}
	if w == nil || w.ID == "" {
		h.t.Fatalf("RegisterWait(%s) returned %+v, want a wait with an id", p.StepID, w)
	}
	return w
}

// park is commit boundary 3.
func (h *harness) park(id string, l starflowtype.Lease) *starflowtype.Run {
	h.t.Helper()
	r, err := h.a.ParkRun(h.ctx(), &state.ParkRunParams{RunID: id, Lease: l})
	if err != nil {
		h.t.Fatalf("ParkRun(%s): %v", id, err)
	}
	return r
}

// waitOn runs the three boundaries for step k with p's wait and returns the
// wait as registered and the run as parked.
func (h *harness) waitOn(k state.StepKey, l starflowtype.Lease, p state.RegisterWaitParams) (*starflowtype.Wait, *starflowtype.Run) {
	h.t.Helper()
	h.pause(k, l)
	p.StepKey, p.Lease = k, l
	w := h.register(&p)
	return w, h.park(k.RunID, l)
}

// signal delivers a signal, failing on error.
func (h *harness) signal(p state.SignalParams) *state.SignalResult {
	h.t.Helper()
	res, err := h.a.Signal(h.ctx(), &p)
	if err != nil {
		h.t.Fatalf("Signal(%s): %v", p.Signal, err)
	}
	if (res.Wait == nil) == (res.Inbox == nil) {
		h.t.Fatalf("Signal(%s) = %+v, want exactly one of Wait and Inbox", p.Signal, res)
	}
	return res
}

// wait reads wait id.
func (h *harness) wait(id string) *starflowtype.Wait {
	h.t.Helper()
	w, err := h.a.GetWait(h.ctx(), &state.GetWaitParams{ID: id})
	if err != nil {
		h.t.Fatalf("GetWait(%s): %v", id, err)
	}
	return w
}

// wantWait fails unless wait id has status (and, when payload is not "",
// that payload).
func (h *harness) wantWait(id string, status starflowtype.WaitStatus, payload string) *starflowtype.Wait {
	h.t.Helper()
	w := h.wait(id)
	equal(h.t, "wait status", w.Status, status)
	if payload != "" {
		jsonEqual(h.t, "wait payload", w.Payload, payload)
	}
	if status != starflowtype.WaitPending && w.ConsumedAt.IsZero() {
		h.t.Errorf("wait %s is %s but consumed_at is not set", id, status)
	}
	return w
}

// wantClaim fails unless run id has status and claim state.
func (h *harness) wantClaim(id string, status starflowtype.RunStatus, claim starflowtype.ClaimState) *starflowtype.Run {
	h.t.Helper()
	r := h.getRun(id)
	if r.Status != status || r.ClaimState != claim {
		h.t.Errorf("run %s is %s/%s, want %s/%s", id, r.Status, r.ClaimState, status, claim)
	}
	return r
}

// countEvents counts run id's events of typ.
func (h *harness) countEvents(id string, typ starflowtype.EventType) int {
	h.t.Helper()
	n := 0
	for _, e := range h.events(id) {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// fire runs one FireDueWaits pass.
func (h *harness) fire() []*starflowtype.Wait {
	h.t.Helper()
	ws, err := h.a.FireDueWaits(h.ctx(), &state.FireDueWaitsParams{})
	if err != nil {
		h.t.Fatalf("FireDueWaits: %v", err)
	}
	return ws
}

// durableWaits opens an adapter for a waits case.
func (s *suite) durableWaits(t *testing.T, hooks ...state.TxHook) *harness {
	t.Helper()
	return s.adapter(t, hooks...)
}

// testWaits: the wait/wake ordering of state.Waiter and every kind of wake.
func (s *suite) testWaits(t *testing.T) {
	t.Parallel()

	t.Run("Ordering", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "approve")
		h.nodeStart(k, l, 1)

		// 1: paused, snapshot, step waiting, phase; the lease still held.
		h.pause(k, l)
		r := h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimRunning)
		equal(t, "leased_by after 1", r.LeasedBy, runnerA)
		jsonEqual(t, "checkpoint_json after 1", r.Checkpoint, `{"order":"o-1"}`)
		equal(t, "phase after 1", r.Phase, "waiting")
		equal(t, "step status after 1", h.step(k).Status, starflowtype.StepWaiting)
		evs := h.events(run.ID)
		last := evs[len(evs)-1]
		equal(t, "last event after 1", last.Type, starflowtype.EventRunPaused)
		equal(t, "run_paused step_id", payloadField(t, last, "step_id"), any("approve"))
		equal(t, "run_paused kind", payloadField(t, last, "kind"), any("wait"))
		if !hasEvent(evs, starflowtype.EventPhase) {
			t.Error("no phase event after OnRunPaused changed the phase")
		}

		// 2: the wait, pending; registering again returns the same row.
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Kind: starflowtype.WaitApproval,
			Signal: "approved", CorrelationKey: "order-1", TokenHash: "abc123", KeyID: "k1",
			ExpiresIn: time.Hour, Notify: json.RawMessage(`{"url":"http://example.test/hook"}`),
			Form: json.RawMessage(`{"title":"Ship order 1?","fields":[{"name":"ok","type":"boolean","required":true}]}`)})
		equal(t, "status", w.Status, starflowtype.WaitPending)
		equal(t, "kind", w.Kind, starflowtype.WaitApproval)
		equal(t, "signal", w.Signal, "approved")
		equal(t, "correlation_key", w.CorrelationKey, "order-1")
		equal(t, "token_hash", w.TokenHash, "abc123")
		equal(t, "key_id", w.KeyID, "k1")
		equal(t, "workspace_id", w.WorkspaceID, state.DefaultWorkspace)
		equal(t, "attempt", w.Attempt, run.Attempt)
		near(t, "expires_at", w.ExpiresAt, time.Now().Add(time.Hour), clockSlack)
		if !w.WakeAt.IsZero() {
			t.Errorf("wake_at = %v, want none", w.WakeAt)
		}
		jsonEqual(t, "notify", w.Notify, `{"url":"http://example.test/hook"}`)
		jsonEqual(t, "form", w.Form, `{"title":"Ship order 1?","fields":[{"name":"ok","type":"boolean","required":true}]}`)
		if listed, err := h.a.ListWaits(h.ctx(), &state.ListWaitsParams{RunID: run.ID}); err != nil || len(listed) != 1 {
			t.Errorf("ListWaits = %d waits, %v; want 1", len(listed), err)
		} else {
			jsonEqual(t, "listed form", listed[0].Form, `{"title":"Ship order 1?","fields":[{"name":"ok","type":"boolean","required":true}]}`)
		}
		again := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Kind: starflowtype.WaitApproval, Signal: "other"})
		equal(t, "re-registered wait id", again.ID, w.ID)
		equal(t, "re-registered wait signal (unchanged)", again.Signal, "approved")
		byStep, err := h.a.GetWait(h.ctx(), &state.GetWaitParams{StepKey: k})
		if err != nil || byStep.ID != w.ID {
			t.Errorf("GetWait by step = %+v, %v; want wait %s", byStep, err, w.ID)
		}

		// 3: parked, no lease, not claimable, listed as paused.
		parked := h.park(run.ID, l)
		equal(t, "ParkRun claim_state", parked.ClaimState, starflowtype.ClaimParked)
		r = h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimParked)
		wantLeaseCleared(t, r)
		if c := h.claim(runnerB); c != nil {
			t.Fatalf("claimed parked run %s", c.ID)
		}
		paused, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{Status: []starflowtype.RunStatus{starflowtype.RunPaused}})
		if err != nil || len(paused) != 1 || paused[0].ID != run.ID || paused[0].ClaimState != starflowtype.ClaimParked {
			t.Errorf("ListRuns(paused) = %s, %v; want the parked run", dump(paused), err)
		}
		// The old lease is dead once parked.
		h.wantLeaseLost("after ParkRun", run, l)

		// The wake: woken, wake_received, re-queued.
		res := h.signal(state.SignalParams{RunID: run.ID, Signal: "approved", Payload: json.RawMessage(`{"ok":true}`)})
		if res.Wait == nil || res.Wait.ID != w.ID {
			t.Fatalf("Signal woke %+v, want wait %s", res.Wait, w.ID)
		}
		h.wantWait(w.ID, starflowtype.WaitWoken, `{"ok":true}`)
		equal(t, "wake_received events", h.countEvents(run.ID, starflowtype.EventWakeReceived), 1)
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)

		// The resume: claimed (still paused, the snapshot returned), then
		// OnRunStart: running, snapshot cleared, run_resumed.
		c := h.claimOwn(run.ID, runnerB)
		equal(t, "claimed run status", c.Status, starflowtype.RunPaused)
		jsonEqual(t, "claimed run checkpoint_json", c.Checkpoint, `{"order":"o-1"}`)
		started := h.countEvents(run.ID, starflowtype.EventRunStarted)
		r2, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()})
		if err != nil {
			t.Fatalf("OnRunStart after the wake: %v", err)
		}
		equal(t, "status after resume", r2.Status, starflowtype.RunRunning)
		if len(r2.Checkpoint) != 0 {
			t.Errorf("checkpoint_json after resume = %s, want cleared", r2.Checkpoint)
		}
		equal(t, "run_resumed events", h.countEvents(run.ID, starflowtype.EventRunResumed), 1)
		equal(t, "run_started events (resume writes run_resumed instead)", h.countEvents(run.ID, starflowtype.EventRunStarted), started)
		h.nodeComplete(k, c.Lease(), `{"ok":true}`, `{}`)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: c.Lease()}); err != nil {
			t.Fatalf("OnRunComplete: %v", err)
		}
	})

	t.Run("WakeBeforePark", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "w")
		h.pause(k, l)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "go"})
		h.signal(state.SignalParams{RunID: run.ID, Signal: "go", Payload: json.RawMessage(`1`)})
		h.wantWait(w.ID, starflowtype.WaitWoken, `1`)
		// The runner still holds the run: the wake only completed the wait.
		r := h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimRunning)
		equal(t, "leased_by", r.LeasedBy, runnerA)
		parked := h.park(run.ID, l)
		equal(t, "ParkRun after the wake", parked.ClaimState, starflowtype.ClaimQueued)
		wantLeaseCleared(t, parked)
		h.claimOwn(run.ID, runnerB)
	})

	t.Run("WakeOfGivenUpStep", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		ka, kb := stepKey(run, "lane-a", "w"), stepKey(run, "lane-b", "w")
		h.pause(ka, l)
		wa := h.register(&state.RegisterWaitParams{StepKey: ka, Lease: l, Signal: "a"})
		h.pause(kb, l)
		wb := h.register(&state.RegisterWaitParams{StepKey: kb, Lease: l, Signal: "b"})
		// The engine gave lane b's step up (a sibling failed in its try).
		if err := h.a.OnNodeError(h.ctx(), &state.NodeErrorParams{StepKey: kb, Lease: l, Kind: "wait", Try: 1, Error: "given up"}); err != nil {
			t.Fatal(err)
		}
		h.park(run.ID, l)
		h.signal(state.SignalParams{RunID: run.ID, Signal: "b"})
		h.wantWait(wb.ID, starflowtype.WaitWoken, "")
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimParked) // nothing would resume b
		h.signal(state.SignalParams{RunID: run.ID, Signal: "a"})
		h.wantWait(wa.ID, starflowtype.WaitWoken, "")
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
	})

	t.Run("ParkNeedsPause", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		before := h.snapshot(run.ID)
		_, err := h.a.ParkRun(h.ctx(), &state.ParkRunParams{RunID: run.ID, Lease: l})
		wantErrIs(t, "ParkRun of a running run", err, starflowtype.ErrConflict)
		sameSnapshot(t, "refused ParkRun", before, h.snapshot(run.ID))
	})

	t.Run("CancelWhileEntering", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "w")
		h.pause(k, l)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "go"})
		// Between 2 and 3 the run is still held: the cancel is a request.
		c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: run.ID})
		if err != nil || !c.CancelRequested || c.Status != starflowtype.RunPaused {
			t.Fatalf("CancelRun = %+v, %v; want a request on the paused, held run", c, err)
		}
		// No runner would see it once parked: ParkRun ends the run.
		r := h.park(run.ID, l)
		equal(t, "ParkRun status", r.Status, starflowtype.RunCancelled)
		equal(t, "ParkRun claim_state", r.ClaimState, starflowtype.ClaimComplete)
		h.wantWait(w.ID, starflowtype.WaitCancelled, "")
		equal(t, "step", h.step(k).Status, starflowtype.StepCancelled)
	})

	t.Run("InboxByRun", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run := h.enqueue(nil)
		// Right after enqueue, before the run reached its wait.
		res := h.signal(state.SignalParams{RunID: run.ID, Signal: "go", Payload: json.RawMessage(`{"n":1}`)})
		if res.Inbox == nil || res.Inbox.RunID != run.ID || res.Inbox.Signal != "go" || res.Inbox.ID == "" {
			t.Fatalf("early signal went to %+v, want an inbox entry for the run", res.Inbox)
		}
		h.signal(state.SignalParams{RunID: run.ID, Signal: "go", Payload: json.RawMessage(`{"n":2}`)})
		h.signal(state.SignalParams{RunID: run.ID, Signal: "other", Payload: json.RawMessage(`{"n":3}`)})

		run, l := h.claimStartOwn(run.ID, runnerA)
		k1 := stepKey(run, "", "w1")
		h.pause(k1, l)
		w1 := h.register(&state.RegisterWaitParams{StepKey: k1, Lease: l, Signal: "go"})
		equal(t, "first wait status (consumed from the inbox)", w1.Status, starflowtype.WaitWoken)
		jsonEqual(t, "first wait payload (oldest entry)", w1.Payload, `{"n":1}`)
		equal(t, "wake_received", h.countEvents(run.ID, starflowtype.EventWakeReceived), 1)
		equal(t, "ParkRun", h.park(run.ID, l).ClaimState, starflowtype.ClaimQueued)

		c := h.claimOwn(run.ID, runnerA)
		if _, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()}); err != nil {
			t.Fatal(err)
		}
		h.nodeComplete(k1, c.Lease(), `{"n":1}`, `{}`)
		k2 := stepKey(run, "", "w2")
		h.pause(k2, c.Lease())
		w2 := h.register(&state.RegisterWaitParams{StepKey: k2, Lease: c.Lease(), Signal: "go"})
		jsonEqual(t, "second wait payload (the next entry, each consumed once)", w2.Payload, `{"n":2}`)
		h.nodeComplete(k2, c.Lease(), `{"n":2}`, `{}`)
		k3 := stepKey(run, "", "w3")
		h.pause(k3, c.Lease())
		w3 := h.register(&state.RegisterWaitParams{StepKey: k3, Lease: c.Lease(), Signal: "go"})
		equal(t, "third wait status (the inbox is empty for go)", w3.Status, starflowtype.WaitPending)
		equal(t, "ParkRun with a pending wait", h.park(run.ID, c.Lease()).ClaimState, starflowtype.ClaimParked)
	})

	t.Run("InboxByCorrelation", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		res := h.signal(state.SignalParams{Signal: "paid", CorrelationKey: "order-7", Payload: json.RawMessage(`{"amount":5}`)})
		if res.Inbox == nil || res.Inbox.RunID != "" || res.Inbox.CorrelationKey != "order-7" {
			t.Fatalf("signal by key went to %+v, want an inbox entry without a run", res.Inbox)
		}
		run, l := h.startOwn(runnerA)
		other := stepKey(run, "", "other-key")
		h.pause(other, l)
		wo := h.register(&state.RegisterWaitParams{StepKey: other, Lease: l, Signal: "paid", CorrelationKey: "order-8"})
		equal(t, "wait with another key", wo.Status, starflowtype.WaitPending)
		h.nodeComplete(other, l, `null`, `{}`) // (the test moves on to another step)

		k := stepKey(run, "", "paid")
		h.pause(k, l)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "paid", CorrelationKey: "order-7"})
		equal(t, "wait with the key", w.Status, starflowtype.WaitWoken)
		jsonEqual(t, "payload", w.Payload, `{"amount":5}`)

		// A signal by key to a pending wait wakes it directly.
		run2, l2 := h.startOwn(runnerB)
		k2 := stepKey(run2, "", "paid")
		w2, _ := h.waitOn(k2, l2, state.RegisterWaitParams{Signal: "paid", CorrelationKey: "order-9"})
		res = h.signal(state.SignalParams{Signal: "paid", CorrelationKey: "order-9", Payload: json.RawMessage(`2`)})
		if res.Wait == nil || res.Wait.ID != w2.ID {
			t.Fatalf("signal by key woke %+v, want %s", res.Wait, w2.ID)
		}
		h.wantClaim(run2.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
	})

	t.Run("SignalErrors", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		_, err := h.a.Signal(h.ctx(), &state.SignalParams{RunID: "00000000-0000-0000-0000-000000000001", Signal: "go"})
		wantErrIs(t, "Signal to a run that does not exist", err, starflowtype.ErrNotFound)
		run, l := h.startOwn(runnerA)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		_, err = h.a.Signal(h.ctx(), &state.SignalParams{RunID: run.ID, Signal: "go"})
		wantErrIs(t, "Signal to an ended run", err, starflowtype.ErrConflict)
		if _, err := h.a.Signal(h.ctx(), &state.SignalParams{Signal: "go"}); err == nil {
			t.Error("Signal with neither a run nor a key: no error")
		}
		if _, err := h.a.Signal(h.ctx(), &state.SignalParams{RunID: run.ID}); err == nil {
			t.Error("Signal without a name: no error")
		}
	})

	t.Run("SignalRacesRegistration", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		// A signal sent while its wait registers is never lost: it wakes
		// the wait, or waits in the inbox and is consumed by it.
		for i := range 20 {
			byKey := i%2 == 0
			run, l := h.startOwn(runnerA)
			k := stepKey(run, "", "w")
			h.pause(k, l)
			key := fmt.Sprintf("key-%d", i)
			sp := state.SignalParams{Signal: "go", Payload: json.RawMessage(`1`)}
			if byKey {
				sp.CorrelationKey = key
			} else {
				sp.RunID = run.ID
			}
			var wg sync.WaitGroup
			var sigErr, regErr error
			var w *starflowtype.Wait
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, sigErr = h.a.Signal(h.ctx(), &sp)
			}()
			go func() {
				defer wg.Done()
				w, regErr = h.a.RegisterWait(h.ctx(), &state.RegisterWaitParams{StepKey: k, Lease: l,
					Kind: starflowtype.WaitSignal, Signal: "go", CorrelationKey: key})
			}()
			wg.Wait()
			if sigErr != nil || regErr != nil {
				t.Fatalf("round %d: Signal: %v, RegisterWait: %v", i, sigErr, regErr)
			}
			h.wantWait(w.ID, starflowtype.WaitWoken, `1`)
			equal(t, fmt.Sprintf("round %d: ParkRun", i), h.park(run.ID, l).ClaimState, starflowtype.ClaimQueued)
		}
	})

	t.Run("Token", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		other, _ := h.startOwn(runnerB)
		k := stepKey(run, "", "approve")
		w, _ := h.waitOn(k, l, state.RegisterWaitParams{Kind: starflowtype.WaitApproval, Signal: "approve", TokenHash: "hash-1", KeyID: "k1"})
		for _, bad := range []struct {
			what string
			p    state.WakeWaitParams
		}{
			{"wrong token hash", state.WakeWaitParams{WaitID: w.ID, TokenHash: "hash-2"}},
			{"no token hash", state.WakeWaitParams{WaitID: w.ID}},
			{"another run", state.WakeWaitParams{WaitID: w.ID, TokenHash: "hash-1", RunID: other.ID}},
			{"unknown wait", state.WakeWaitParams{WaitID: "00000000-0000-0000-0000-0000000000ff", TokenHash: "hash-1"}},
			{"malformed wait id", state.WakeWaitParams{WaitID: "not-an-id", TokenHash: "hash-1"}},
		} {
			before := h.snapshot(run.ID)
			_, err := h.a.WakeWait(h.ctx(), &bad.p)
			wantErrIs(t, "WakeWait with "+bad.what, err, starflowtype.ErrNotFound)
			sameSnapshot(t, "WakeWait with "+bad.what, before, h.snapshot(run.ID))
			equal(t, "wait status after WakeWait with "+bad.what, h.wait(w.ID).Status, starflowtype.WaitPending)
		}
		got, err := h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w.ID, TokenHash: "hash-1", RunID: run.ID, Payload: json.RawMessage(`{"approved":true}`)})
		if err != nil {
			t.Fatalf("WakeWait: %v", err)
		}
		equal(t, "woken status", got.Status, starflowtype.WaitWoken)
		jsonEqual(t, "woken payload", got.Payload, `{"approved":true}`)
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
		before := h.snapshot(run.ID)
		_, err = h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w.ID, TokenHash: "hash-1", Payload: json.RawMessage(`{"approved":false}`)})
		wantErrIs(t, "second WakeWait", err, starflowtype.ErrWaitClosed)
		sameSnapshot(t, "second WakeWait", before, h.snapshot(run.ID))
		h.wantWait(w.ID, starflowtype.WaitWoken, `{"approved":true}`)
	})

	t.Run("ConcurrentWakes", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		w, _ := h.waitOn(stepKey(run, "", "approve"), l, state.RegisterWaitParams{Kind: starflowtype.WaitApproval, TokenHash: "h"})
		const n = 64
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				payload, _ := json.Marshal(map[string]int{"caller": i})
				_, errs[i] = h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w.ID, TokenHash: "h", Payload: payload})
			}()
		}
		close(start)
		wg.Wait()
		ok, closed := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, starflowtype.ErrWaitClosed):
				closed++
			default:
				t.Errorf("WakeWait: %v, want nil or ErrWaitClosed", err)
			}
		}
		equal(t, "successful wakes", ok, 1)
		equal(t, "ErrWaitClosed wakes", closed, n-1)
		equal(t, "wake_received events", h.countEvents(run.ID, starflowtype.EventWakeReceived), 1)
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
	})

	t.Run("Timer", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		w, _ := h.waitOn(stepKey(run, "", "sleep"), l, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeIn: shortWait})
		near(t, "wake_at", w.WakeAt, time.Now().Add(shortWait), clockSlack)
		var fired []*starflowtype.Wait
		eventually(t, "the timer fires", func() bool { fired = h.fire(); return len(fired) > 0 })
		if len(fired) != 1 || fired[0].ID != w.ID || fired[0].Status != starflowtype.WaitWoken {
			t.Fatalf("FireDueWaits = %s, want wait %s woken", dump(fired), w.ID)
		}
		got := h.wantWait(w.ID, starflowtype.WaitWoken, "")
		if s, ok := jsonObject(t, got.Payload)["fired_at"].(string); !ok || s == "" {
			t.Errorf("timer payload %s has no fired_at", got.Payload)
		}
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
		if again := h.fire(); len(again) != 0 {
			t.Errorf("second FireDueWaits fired %s again", dump(again))
		}
		equal(t, "wake_received events", h.countEvents(run.ID, starflowtype.EventWakeReceived), 1)

		// An absolute deadline already past fires at the next pass (a timer
		// whose deadline passed while everything was down).
		run2, l2 := h.startOwn(runnerB)
		w2, _ := h.waitOn(stepKey(run2, "", "until"), l2, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Minute)})
		fired = h.fire()
		if len(fired) != 1 || fired[0].ID != w2.ID {
			t.Errorf("FireDueWaits = %s, want the overdue wait %s", dump(fired), w2.ID)
		}
	})

	t.Run("ConcurrentPollers", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		const n = 20
		var ids []string
		for range n {
			run, l := h.startOwn(runnerA)
			h.waitOn(stepKey(run, "", "sleep"), l, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeAt: time.Now().Add(-time.Second)})
			ids = append(ids, run.ID)
		}
		var mu sync.Mutex
		fired := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws, err := h.a.FireDueWaits(h.ctx(), &state.FireDueWaitsParams{})
				if err != nil {
					t.Errorf("FireDueWaits: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, w := range ws {
					fired[w.ID]++
				}
			}()
		}
		wg.Wait()
		equal(t, "waits fired by four concurrent pollers", len(fired), n)
		for id, c := range fired {
			if c != 1 {
				t.Errorf("wait %s reported fired %d times", id, c)
			}
		}
		for _, id := range ids {
			equal(t, "wake_received of run "+id, h.countEvents(id, starflowtype.EventWakeReceived), 1)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		w, _ := h.waitOn(stepKey(run, "", "approve"), l, state.RegisterWaitParams{Kind: starflowtype.WaitApproval, Signal: "ok", TokenHash: "h", ExpiresIn: shortWait})
		eventually(t, "the timeout fires", func() bool { return len(h.fire()) > 0 })
		h.wantWait(w.ID, starflowtype.WaitTimedOut, `{"timed_out":true}`)
		h.wantClaim(run.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
		_, err := h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w.ID, TokenHash: "h"})
		wantErrIs(t, "WakeWait after the timeout", err, starflowtype.ErrWaitClosed)

		// A wait whose timeout passed but that the poller has not fired yet
		// is closed to tokens too.
		run2, l2 := h.startOwn(runnerB)
		w2, _ := h.waitOn(stepKey(run2, "", "approve"), l2, state.RegisterWaitParams{Kind: starflowtype.WaitApproval, TokenHash: "h2", ExpiresAt: time.Now().Add(-time.Second)})
		_, err = h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w2.ID, TokenHash: "h2"})
		wantErrIs(t, "WakeWait past the timeout", err, starflowtype.ErrWaitClosed)
		equal(t, "status", h.wait(w2.ID).Status, starflowtype.WaitPending)
	})

	t.Run("ChildEnd", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			end    func(h *harness, child *starflowtype.Run, l starflowtype.Lease)
			status string
			output any
			errMsg string
		}{
			{"Complete", func(h *harness, c *starflowtype.Run, l starflowtype.Lease) {
				if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: c.ID, Lease: l, Output: json.RawMessage(`{"total":3}`)}); err != nil {
					h.t.Fatal(err)
				}
			}, "succeeded", map[string]any{"total": 3.0}, ""},
			{"Fail", func(h *harness, c *starflowtype.Run, l starflowtype.Lease) {
				if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: c.ID, Lease: l, Error: "boom"}); err != nil {
					h.t.Fatal(err)
				}
			}, "failed", nil, "boom"},
			{"Cancel", func(h *harness, c *starflowtype.Run, l starflowtype.Lease) {
				if _, err := h.a.OnRunCancelled(h.ctx(), &state.RunCancelledParams{RunID: c.ID, Lease: l}); err != nil {
					h.t.Fatal(err)
				}
			}, "cancelled", nil, ""},
			{"DeadLetter", func(h *harness, c *starflowtype.Run, l starflowtype.Lease) {
				if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{}); err != nil {
					h.t.Fatal(err)
				}
			}, "failed", nil, "runner_lost"},
		} {
			for _, early := range []bool{false, true} {
				name := tc.name + "/WaitFirst"
				if early {
					name = tc.name + "/EndFirst"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					h := s.durableWaits(t)
					parent, pl := h.startOwn(runnerA)
					child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
					var cl starflowtype.Lease
					if tc.name == "DeadLetter" {
						cl = h.claimExpired(child.ID)
					} else {
						_, cl = h.claimStartOwn(child.ID, runnerB)
					}
					k := stepKey(parent, "", "call")
					var w *starflowtype.Wait
					if !early {
						w, _ = h.waitOn(k, pl, state.RegisterWaitParams{Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
						equal(t, "child wait signal", w.Signal, starflowtype.ChildSignal)
					}
					tc.end(h, child, cl)
					if early {
						// The parent was still running: the end waits in
						// the inbox until the wait registers.
						h.pause(k, pl)
						w = h.register(&state.RegisterWaitParams{StepKey: k, Lease: pl, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
						equal(t, "ParkRun", h.park(parent.ID, pl).ClaimState, starflowtype.ClaimQueued)
					}
					got := h.wantWait(w.ID, starflowtype.WaitWoken, "")
					p := jsonObject(t, got.Payload)
					equal(t, "payload run_id", p["run_id"], any(child.ID))
					equal(t, "payload status", p["status"], any(tc.status))
					equal(t, "payload error", p["error"], any(tc.errMsg))
					if tc.output != nil {
						jsonEqual(t, "payload output", mustJSON(p["output"]), `{"total":3}`)
					} else if p["output"] != nil {
						t.Errorf("payload output = %v, want null", p["output"])
					}
					h.wantClaim(parent.ID, starflowtype.RunPaused, starflowtype.ClaimQueued)
					equal(t, "parent wake_received", h.countEvents(parent.ID, starflowtype.EventWakeReceived), 1)
				})
			}
		}
	})

	t.Run("CancelCascades", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		parent, pl := h.startOwn(runnerA)
		queued := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		grandchild := h.enqueue(&state.EnqueueRunParams{ParentRunID: queued.ID, TriggerType: starflowtype.TriggerChild})
		running := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		_, rl := h.claimStartOwn(running.ID, runnerB)
		done := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		_, dl := h.claimStartOwn(done.ID, runnerB)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: done.ID, Lease: dl}); err != nil {
			t.Fatal(err)
		}
		// A paused child, parked on a wait of its own.
		pausedChild := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		pc, pcl := h.claimStartOwn(pausedChild.ID, runnerB)
		pcw, _ := h.waitOn(stepKey(pc, "", "w"), pcl, state.RegisterWaitParams{Signal: "go"})

		w, _ := h.waitOn(stepKey(parent, "", "call"), pl, state.RegisterWaitParams{Kind: starflowtype.WaitChild, CorrelationKey: queued.ID})
		if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: parent.ID}); err != nil {
			t.Fatalf("CancelRun: %v", err)
		}
		h.wantClaim(parent.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantWait(w.ID, starflowtype.WaitCancelled, "")
		equal(t, "parent's waiting step", h.step(stepKey(parent, "", "call")).Status, starflowtype.StepCancelled)
		h.wantClaim(queued.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantClaim(grandchild.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantClaim(pausedChild.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantWait(pcw.ID, starflowtype.WaitCancelled, "")
		if r := h.getRun(running.ID); r.Status != starflowtype.RunRunning || !r.CancelRequested {
			t.Errorf("running child: %s cancel_requested=%v, want running with cancel requested", r.Status, r.CancelRequested)
		}
		equal(t, "ended child status", h.getRun(done.ID).Status, starflowtype.RunSucceeded)
		err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: stepKey(running, "", "s"), Lease: rl, Kind: "x", Try: 1})
		wantErrIs(t, "running child's next step", err, starflowtype.ErrCancelRequested)
	})

	t.Run("PauseRefusedAfterCancelRequest", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "call")
		h.nodeStart(k, l, 1)
		// The cancel lands after node_start, before the pause: the run
		// enters no wait (a workflow_call starts no child for it).
		if c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: run.ID}); err != nil || !c.CancelRequested {
			t.Fatalf("CancelRun = %+v, %v; want a request", c, err)
		}
		before := h.snapshot(run.ID)
		err := h.a.OnRunPaused(h.ctx(), &state.RunPausedParams{StepKey: k, Lease: l, Kind: "workflow_call", Snapshot: json.RawMessage(`{}`)})
		wantErrIs(t, "OnRunPaused after a cancel request", err, starflowtype.ErrCancelRequested)
		sameSnapshot(t, "refused OnRunPaused", before, h.snapshot(run.ID))
	})

	t.Run("CancelAtParkCascades", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		parent, pl := h.startOwn(runnerA)
		k := stepKey(parent, "", "call")
		h.pause(k, pl)
		// The cancel is a request (the run is held) and finds no child yet.
		if c, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: parent.ID}); err != nil || !c.CancelRequested {
			t.Fatalf("CancelRun = %+v, %v; want a request", c, err)
		}
		// The workflow_call's child starts after it (with a child of its
		// own), and another child is already running.
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		grandchild := h.enqueue(&state.EnqueueRunParams{ParentRunID: child.ID, TriggerType: starflowtype.TriggerChild})
		running := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		h.claimStartOwn(running.ID, runnerB)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: pl, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
		r := h.park(parent.ID, pl)
		equal(t, "ParkRun status", r.Status, starflowtype.RunCancelled)
		h.wantWait(w.ID, starflowtype.WaitCancelled, "")
		h.wantClaim(child.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantClaim(grandchild.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		if r := h.getRun(running.ID); r.Status != starflowtype.RunRunning || !r.CancelRequested {
			t.Errorf("running child: %s cancel_requested=%v, want running with cancel requested", r.Status, r.CancelRequested)
		}
	})

	t.Run("RunCancelledCascades", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		parent, pl := h.startOwn(runnerA)
		if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: parent.ID}); err != nil {
			t.Fatal(err)
		}
		// A child started after the request (another lane's workflow_call)
		// is cancelled with the run when the runner ends it.
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		if _, err := h.a.OnRunCancelled(h.ctx(), &state.RunCancelledParams{RunID: parent.ID, Lease: pl}); err != nil {
			t.Fatalf("OnRunCancelled: %v", err)
		}
		h.wantClaim(parent.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
		h.wantClaim(child.ID, starflowtype.RunCancelled, starflowtype.ClaimComplete)
	})

	t.Run("ChildWakeHandedToNextAttempt", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		parent, pl := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3}).ID, runnerA)
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
		_, cl := h.claimStartOwn(child.ID, runnerB)
		k1 := stepKey(parent, "lane", "call")
		h.pause(k1, pl)
		w1 := h.register(&state.RegisterWaitParams{StepKey: k1, Lease: pl, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: child.ID, Lease: cl, Output: json.RawMessage(`{"total":3}`)}); err != nil {
			t.Fatal(err)
		}
		h.wantWait(w1.ID, starflowtype.WaitWoken, "")
		// The attempt fails (another lane) before resuming the wake.
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: parent.ID, Lease: pl, Error: "lane b failed", Retry: true}); err != nil {
			t.Fatal(err)
		}
		// The next attempt re-attaches to the same child: the end comes
		// back from the inbox, once.
		p2, pl2 := h.claimStartOwn(parent.ID, runnerA)
		equal(t, "attempt", p2.Attempt, 2)
		k2 := stepKey(p2, "lane", "call")
		h.pause(k2, pl2)
		w2 := h.register(&state.RegisterWaitParams{StepKey: k2, Lease: pl2, Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
		equal(t, "attempt 2's wait", w2.Status, starflowtype.WaitWoken)
		p := jsonObject(t, w2.Payload)
		equal(t, "payload run_id", p["run_id"], any(child.ID))
		equal(t, "payload status", p["status"], any("succeeded"))
		jsonEqual(t, "payload output", mustJSON(p["output"]), `{"total":3}`)
		equal(t, "ParkRun", h.park(parent.ID, pl2).ClaimState, starflowtype.ClaimQueued)
	})

	t.Run("ChildEndFromItsRow", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		parent, pl := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{MaxAttempts: 1}).ID, runnerA)
		ended := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild, MaxAttempts: 1})
		_, el := h.claimStartOwn(ended.ID, runnerB)
		running := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		other := h.enqueue(nil) // ended, but not this parent's child
		_, ol := h.claimStartOwn(other.ID, runnerB)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: other.ID, Lease: ol}); err != nil {
			t.Fatal(err)
		}
		// The parent ends first: the child's end is delivered to no one.
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: parent.ID, Lease: pl, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: ended.ID, Lease: el, Error: "child boom"}); err != nil {
			t.Fatal(err)
		}
		// An operator's new attempt re-attaches to the children: the ended
		// one's wait completes from its row, with nothing in the inbox.
		if _, err := h.a.RequeueRun(h.ctx(), &state.RequeueRunParams{RunID: parent.ID, Reason: "retrigger"}); err != nil {
			t.Fatal(err)
		}
		p2, pl2 := h.claimStartOwn(parent.ID, runnerA)
		k := stepKey(p2, "", "call")
		h.pause(k, pl2)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: pl2, Kind: starflowtype.WaitChild, CorrelationKey: ended.ID})
		equal(t, "wait for the ended child", w.Status, starflowtype.WaitWoken)
		p := jsonObject(t, w.Payload)
		equal(t, "payload run_id", p["run_id"], any(ended.ID))
		equal(t, "payload status", p["status"], any("failed"))
		equal(t, "payload error", p["error"], any("child boom"))
		if p["output"] != nil {
			t.Errorf("payload output = %v, want null", p["output"])
		}
		evs := h.events(parent.ID)
		last := evs[len(evs)-1]
		equal(t, "last event", last.Type, starflowtype.EventWakeReceived)
		equal(t, "wake_received via", payloadField(t, last, "via"), any("child"))
		// A child still running, a run that is not a child of this one, and
		// a key that names no run leave their waits pending.
		for i, key := range []string{running.ID, other.ID, "not-a-run"} {
			kk := stepKey(p2, "", fmt.Sprintf("call%d", i))
			h.pause(kk, pl2)
			pw := h.register(&state.RegisterWaitParams{StepKey: kk, Lease: pl2, Kind: starflowtype.WaitChild, CorrelationKey: key})
			equal(t, "wait for "+key, pw.Status, starflowtype.WaitPending)
		}
		equal(t, "ParkRun", h.park(parent.ID, pl2).ClaimState, starflowtype.ClaimQueued)
	})

	t.Run("Sweep", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		// Paused and parked: no lease, never swept.
		parkedRun := h.enqueue(nil)
		pl := h.claimExpired(parkedRun.ID)
		pr := h.getRun(parkedRun.ID)
		pw, _ := h.waitOn(stepKey(pr, "", "w"), pl, state.RegisterWaitParams{Signal: "go"})
		// Paused but not parked: the runner died between 1 and 3.
		dead := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3})
		dl := h.claimExpired(dead.ID)
		dr := h.getRun(dead.ID)
		k := stepKey(dr, "", "w")
		h.pause(k, dl)
		dw := h.register(&state.RegisterWaitParams{StepKey: k, Lease: dl, Signal: "go"})

		changed, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(changed) != 1 || changed[0].ID != dead.ID {
			t.Fatalf("sweep changed %s, want only the paused run that was not parked", dump(changed))
		}
		h.wantClaim(parkedRun.ID, starflowtype.RunPaused, starflowtype.ClaimParked)
		h.wantWait(pw.ID, starflowtype.WaitPending, "")
		r := h.wantClaim(dead.ID, starflowtype.RunInterrupted, starflowtype.ClaimQueued)
		equal(t, "attempt after the sweep", r.Attempt, 2)
		h.wantWait(dw.ID, starflowtype.WaitCancelled, "")
		equal(t, "step of the lost wait", h.step(k).Status, starflowtype.StepFailed)
	})

	t.Run("SweepRedeliversUnresumedWake", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3})
		l := h.claimExpired(run.ID)
		r := h.getRun(run.ID)
		k := stepKey(r, "", "w")
		h.pause(k, l)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "go"})
		h.signal(state.SignalParams{RunID: run.ID, Signal: "go", Payload: json.RawMessage(`{"once":true}`)})
		// The runner dies before ParkRun: the woken wait was never resumed.
		if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{}); err != nil {
			t.Fatal(err)
		}
		h.wantWait(w.ID, starflowtype.WaitWoken, `{"once":true}`)
		r2, l2 := h.claimStartOwn(run.ID, runnerB)
		equal(t, "attempt", r2.Attempt, 2)
		k2 := stepKey(r2, "", "w")
		h.pause(k2, l2)
		w2 := h.register(&state.RegisterWaitParams{StepKey: k2, Lease: l2, Signal: "go"})
		equal(t, "new attempt's wait (the wake came back from the inbox)", w2.Status, starflowtype.WaitWoken)
		jsonEqual(t, "payload", w2.Payload, `{"once":true}`)
		// Once: a third attempt's wait would find nothing.
		h.nodeComplete(k2, l2, `{"once":true}`, `{}`)
		k3 := stepKey(r2, "", "w-again")
		h.pause(k3, l2)
		w3 := h.register(&state.RegisterWaitParams{StepKey: k3, Lease: l2, Signal: "go"})
		equal(t, "later wait", w3.Status, starflowtype.WaitPending)
	})

	t.Run("RunEndCancelsWaits", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "w")
		h.pause(k, l)
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "go"})
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "gave up"}); err != nil {
			t.Fatal(err)
		}
		h.wantWait(w.ID, starflowtype.WaitCancelled, "")
		if len(h.getRun(run.ID).Checkpoint) != 0 {
			t.Error("checkpoint_json kept after the run failed")
		}
	})

	t.Run("Notify", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		none := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "a"), Lease: l, Signal: "a"})
		fails := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "b"), Lease: l, Signal: "b", Notify: json.RawMessage(`{"url":"http://b"}`)})
		ok := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "c"), Lease: l, Signal: "c", Notify: json.RawMessage(`{"url":"http://c"}`)})
		if ok.Form != nil {
			t.Errorf("a wait registered without a form has form %s", ok.Form)
		}
		// Within its grace the registering runner is still trying inline:
		// no retrier may list it.
		grace := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "d"), Lease: l, Signal: "d",
			Notify: json.RawMessage(`{"url":"http://d"}`), NotifyGrace: time.Hour})
		pending := func() []string {
			ws, err := h.a.PendingNotifies(h.ctx(), &state.PendingNotifiesParams{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, w := range ws {
				ids = append(ids, w.ID)
			}
			return ids
		}
		if got := pending(); len(got) != 2 || got[0] != fails.ID || got[1] != ok.ID {
			t.Fatalf("PendingNotifies = %v, want [%s %s] (not %s, which has no notify, nor %s, within its grace)", got, fails.ID, ok.ID, none.ID, grace.ID)
		}
		if err := h.a.MarkNotified(h.ctx(), &state.MarkNotifiedParams{WaitID: fails.ID, RetryIn: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := h.a.MarkNotified(h.ctx(), &state.MarkNotifiedParams{WaitID: ok.ID, Delivered: true}); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 0 {
			t.Errorf("PendingNotifies after marking = %v, want none (one delivered, one retried in an hour)", got)
		}
		equal(t, "notify_tries of the failed one", h.wait(fails.ID).NotifyTries, 1)
		if h.wait(ok.ID).NotifiedAt.IsZero() {
			t.Error("notified_at not set after delivery")
		}
		err := h.a.MarkNotified(h.ctx(), &state.MarkNotifiedParams{WaitID: "00000000-0000-0000-0000-0000000000ee", Delivered: true})
		wantErrIs(t, "MarkNotified of an unknown wait", err, starflowtype.ErrNotFound)
		// A retry due now is listed again.
		if err := h.a.MarkNotified(h.ctx(), &state.MarkNotifiedParams{WaitID: fails.ID, RetryIn: 0}); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 1 || got[0] != fails.ID {
			t.Errorf("PendingNotifies after a retry due now = %v, want [%s]", got, fails.ID)
		}
	})

	t.Run("Lists", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		a := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "a"), Lease: l, Signal: "a"})
		b := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "b"), Lease: l, Signal: "b"})
		h.signal(state.SignalParams{RunID: run.ID, Signal: "b"})
		all, err := h.a.ListWaits(h.ctx(), &state.ListWaitsParams{RunID: run.ID})
		if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != b.ID {
			t.Errorf("ListWaits = %s, %v; want [a b]", dump(all), err)
		}
		woken, err := h.a.ListWaits(h.ctx(), &state.ListWaitsParams{Status: []starflowtype.WaitStatus{starflowtype.WaitWoken}})
		if err != nil || len(woken) != 1 || woken[0].ID != b.ID {
			t.Errorf("ListWaits(woken) = %s, %v; want [b]", dump(woken), err)
		}
		_, err = h.a.GetWait(h.ctx(), &state.GetWaitParams{ID: "00000000-0000-0000-0000-0000000000dd"})
		wantErrIs(t, "GetWait unknown", err, starflowtype.ErrNotFound)
		_, err = h.a.GetWait(h.ctx(), &state.GetWaitParams{ID: "not-a-uuid"})
		wantErrIs(t, "GetWait malformed", err, starflowtype.ErrNotFound)
		_, err = h.a.RegisterWait(h.ctx(), &state.RegisterWaitParams{StepKey: stepKey(run, "", "c"), Lease: l, Kind: "nap"})
		if err == nil {
			t.Error("RegisterWait of kind nap: no error")
		}
	})

	t.Run("Hooks", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, false)
		h := s.durableWaits(t, rec.hook)
		run, l := h.startOwn(runnerA)
		k := stepKey(run, "", "w")
		h.pause(k, l)
		ch := rec.last("OnRunPaused")
		if len(ch.Steps) != 1 || ch.Steps[0].Status != starflowtype.StepWaiting || ch.Run == nil || ch.Run.Status != starflowtype.RunPaused {
			t.Errorf("OnRunPaused change: steps %s run %+v", dump(ch.Steps), ch.Run)
		}
		w := h.register(&state.RegisterWaitParams{StepKey: k, Lease: l, Signal: "go", TokenHash: "h"})
		ch = rec.last("RegisterWait")
		if len(ch.Waits) != 1 || ch.Waits[0].ID != w.ID || ch.Waits[0].Status != starflowtype.WaitPending {
			t.Errorf("RegisterWait change waits = %s", dump(ch.Waits))
		}
		h.park(run.ID, l)
		if _, err := h.a.WakeWait(h.ctx(), &state.WakeWaitParams{WaitID: w.ID, TokenHash: "h", Payload: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("WakeWait")
		if len(ch.Waits) != 1 || ch.Waits[0].Status != starflowtype.WaitWoken || ch.RunID != run.ID ||
			ch.Run == nil || ch.Run.ClaimState != starflowtype.ClaimQueued || !hasEvent(ch.Events, starflowtype.EventWakeReceived) {
			t.Errorf("WakeWait change: waits %s run %+v events %v", dump(ch.Waits), ch.Run, eventTypes(ch.Events))
		}
		// A failing hook rolls a wake back.
		rec.setFail("Signal")
		_, err := h.a.Signal(h.ctx(), &state.SignalParams{RunID: run.ID, Signal: "other"})
		wantErrIs(t, "Signal with a failing hook", err, errHook)
		rec.setFail("")

		c := h.claimOwn(run.ID, runnerA)
		if _, err := h.a.OnRunStart(h.ctx(), &state.RunStartParams{RunID: run.ID, Lease: c.Lease()}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.a.SessionSet(h.ctx(), &state.SessionSetParams{SessionID: "s", Key: "k", Value: json.RawMessage(`"v"`), RunID: run.ID, Lease: c.Lease()}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("SessionSet")
		if len(ch.SessionVars) != 1 || ch.SessionVars[0].Key != "k" || string(ch.SessionVars[0].Value) != `"v"` {
			t.Errorf("SessionSet change vars = %s", dump(ch.SessionVars))
		}
		pending := h.register(&state.RegisterWaitParams{StepKey: stepKey(run, "", "w2"), Lease: c.Lease(), Signal: "never"})
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: c.Lease()}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("OnRunComplete")
		if len(ch.SessionVars) != 1 || ch.SessionVars[0].Key != "k" || ch.SessionVars[0].Value != nil {
			t.Errorf("OnRunComplete change vars = %s, want k removed (nil value)", dump(ch.SessionVars))
		}
		if len(ch.Waits) != 1 || ch.Waits[0].ID != pending.ID || ch.Waits[0].Status != starflowtype.WaitCancelled {
			t.Errorf("OnRunComplete change waits = %s, want the pending one cancelled", dump(ch.Waits))
		}
		if len(ch.Runs) != 0 {
			t.Errorf("OnRunComplete of a run without parent: Change.Runs = %s", dump(ch.Runs))
		}

		// A child's end that wakes its parked parent lists the parent.
		parent, pl := h.startOwn(runnerA)
		child := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
		pw, _ := h.waitOn(stepKey(parent, "", "call"), pl, state.RegisterWaitParams{Kind: starflowtype.WaitChild, CorrelationKey: child.ID})
		_, cl := h.claimStartOwn(child.ID, runnerB)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: child.ID, Lease: cl}); err != nil {
			t.Fatal(err)
		}
		ch = rec.last("OnRunComplete")
		equal(t, "child's end: RunID", ch.RunID, child.ID)
		if len(ch.Runs) != 1 || ch.Runs[0].ID != parent.ID || ch.Runs[0].ClaimState != starflowtype.ClaimQueued {
			t.Errorf("child's end: Change.Runs = %s, want the re-queued parent", dump(ch.Runs))
		}
		if len(ch.Waits) != 1 || ch.Waits[0].ID != pw.ID || ch.Waits[0].Status != starflowtype.WaitWoken {
			t.Errorf("child's end: Change.Waits = %s, want the parent's woken wait", dump(ch.Waits))
		}
	})
}

// jsonObject decodes b as a JSON object.
func jsonObject(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Errorf("%s is not a JSON object: %v", b, err)
	}
	return m
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
