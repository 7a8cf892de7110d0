package statetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// BackdateColumns are the time columns Options.Backdate moves back, by
// table: the columns the retention ages are measured on and those beside
// them that must stay in order.
var BackdateColumns = map[string][]string{
	"workflow_runs":         {"created_at", "updated_at", "completed_at"},
	"workflow_waits":        {"created_at", "consumed_at"},
	"workflow_wake_inbox":   {"created_at", "consumed_at"},
	"workflow_blobs":        {"created_at", "written_at"},
	"idempotency_receipts":  {"created_at", "expires_at"},
	"workflow_session_vars": {"updated_at", "keep_until"},
	"mirror_outbox":         {"created_at", "applied_at"},
}

const day = 24 * time.Hour

// gcHarness is a harness whose rows can be aged.
type gcHarness struct {
	*harness
	backdate func(by time.Duration)
}

// retention opens a fresh adapter whose rows the case can age (with
// hooks installed), or skips.
func (s *suite) retention(t *testing.T, hooks ...state.TxHook) *gcHarness {
	t.Helper()
	if s.opts.Backdate == nil {
		t.Skip("statetest: Options.Backdate is not set; the retention cases need to age rows")
	}
	h := s.stored(t, hooks...)
	return &gcHarness{harness: h, backdate: func(by time.Duration) { s.opts.Backdate(t, h.a, by) }}
}

// gc runs CollectGarbage, failing on error.
func (h *gcHarness) gc(p state.GCParams) state.GCReport {
	h.t.Helper()
	rep, err := h.a.CollectGarbage(h.ctx(), &p)
	if err != nil {
		h.t.Fatalf("CollectGarbage(%+v): %v (report %+v)", p, err, rep)
	}
	return rep
}

// ended makes a run of workflow wf in workspace ws (default when "") that
// ran one step (output out) and ended as end: succeeded, failed,
// cancelled, dead (dead-lettered), held (interrupted, manual) or "" (left
// running: not ended).
func (h *gcHarness) ended(ws, wf, end, out string) *starflowtype.Run {
	h.t.Helper()
	p := &state.EnqueueRunParams{WorkspaceID: ws, WorkflowName: wf}
	switch end {
	case "dead":
		p.MaxAttempts = 1
	case "held":
		p.RecoveryMode = starflowtype.RecoveryManual
	}
	if end == "cancelled" {
		r := h.enqueue(p)
		if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: r.ID}); err != nil {
			h.t.Fatalf("CancelRun: %v", err)
		}
		return r
	}
	r, l := h.claimStartOwn(h.enqueue(p).ID, runnerA)
	h.runStep(stepKey(r, "", "s"), l, out, `{}`)
	var err error
	switch end {
	case "succeeded":
		_, err = h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: r.ID, Lease: l, Output: json.RawMessage(`{}`)})
	case "failed":
		_, err = h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom"})
	case "dead", "held":
		_, err = h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom", Retry: true})
	}
	if err != nil {
		h.t.Fatalf("end run as %s: %v", end, err)
	}
	got := h.getRun(r.ID)
	switch want := end; want {
	case "dead":
		if !got.DeadLettered {
			h.t.Fatalf("run %s is %s, not dead-lettered", r.ID, got.Status)
		}
	case "held":
		if got.Status != starflowtype.RunInterrupted || got.ClaimState != starflowtype.ClaimAbandoned {
			h.t.Fatalf("run %s is %s/%s, want interrupted/abandoned", r.ID, got.Status, got.ClaimState)
		}
	}
	return got
}

// exists reports whether run id is still stored.
func (h *gcHarness) exists(id string) bool {
	h.t.Helper()
	_, err := h.a.GetRun(h.ctx(), &state.GetRunParams{ID: id})
	if err != nil {
		wantErrIs(h.t, "GetRun("+id+")", err, starflowtype.ErrNotFound)
		return false
	}
	return true
}

// rowsOf counts what CollectGarbage removes with run id.
func (h *gcHarness) rowsOf(id string) state.GCReport {
	h.t.Helper()
	return state.GCReport{Runs: 1, Steps: int64(len(h.steps(id, 0))), Events: int64(len(h.events(id))),
		Checkpoints: int64(len(h.checkpoints(id, 0)))}
}

// putRetention applies a revision of workflow name in ws whose spec has
// retention (nil: none).
func (h *gcHarness) putRetention(ws, name, rev string, retention map[string]string) {
	h.t.Helper()
	spec := map[string]any{"name": name, "steps": []any{}}
	if retention != nil {
		spec["retention"] = retention
	}
	b, _ := json.Marshal(spec)
	if _, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{WorkspaceID: ws, Name: name, Revision: rev, Spec: b}); err != nil {
		h.t.Fatalf("PutDefinition(%s): %v", name, err)
	}
}

// testRetention: CollectGarbage removes exactly what is due.
func (s *suite) testRetention(t *testing.T) {
	t.Parallel()

	// Runs of every status at ages either side of their thresholds, the
	// definitions' overrides, a dry run first.
	t.Run("Runs", func(t *testing.T) {
		t.Parallel()
		h := s.retention(t)
		h.putRetention("", "short", "r1", map[string]string{"succeeded": "24h0m0s", "failed": "48h0m0s"})
		h.putRetention("", "long", "r1", map[string]string{"succeeded": "720h0m0s"})
		h.putRetention("", "dropped", "r1", map[string]string{"succeeded": "1h0m0s"})
		h.putRetention("", "dropped", "r2", nil) // the current revision has none: the default
		var due, kept []string
		add := func(r *starflowtype.Run, isDue bool) {
			if isDue {
				due = append(due, r.ID)
			} else {
				kept = append(kept, r.ID)
			}
		}
		// Layers, each older than the next: ages 91, 89, 31, 29, 8, 6 days.
		layers := []struct {
			backdate time.Duration
			make     func()
		}{
			{2 * day, func() { // 91 days
				add(h.ended("", "wf", "held", `1`), true)
				add(h.ended("", "wf", "dead", `1`), true)
				add(h.enqueue(nil), false) // queued: never
				add(h.ended("", "wf", "", `1`), false)
			}},
			{58 * day, func() { // 89 days
				add(h.ended("", "wf", "held", `1`), false)
				add(h.ended("", "wf", "dead", `1`), false)
			}},
			{2 * day, func() { // 31 days
				add(h.ended("", "wf", "failed", `1`), true)
				add(h.ended("", "wf", "cancelled", `1`), true)
			}},
			{21 * day, func() { // 29 days
				add(h.ended("", "wf", "failed", `1`), false)
				add(h.ended("", "wf", "cancelled", `1`), false)
			}},
			{2 * day, func() { // 8 days
				add(h.ended("", "wf", "succeeded", `1`), true)
				add(h.ended("", "long", "succeeded", `1`), false) // 30 days
			}},
			{6 * day, func() { // 6 days
				add(h.ended("", "wf", "succeeded", `1`), false)
				add(h.ended("", "short", "succeeded", `1`), true) // 1 day
				add(h.ended("", "short", "failed", `1`), true)    // 2 days
				add(h.ended("", "short", "held", `1`), false)     // held: 90 days, not overridden
				add(h.ended("other", "short", "succeeded", `1`), false)
				add(h.ended("", "dropped", "succeeded", `1`), false)
			}},
		}
		for _, l := range layers {
			l.make()
			h.backdate(l.backdate)
		}
		var want state.GCReport
		for _, id := range due {
			want.Add(h.rowsOf(id))
		}

		dry := h.gc(state.GCParams{DryRun: true, Batch: 3})
		if dry != want {
			t.Errorf("dry run = %+v, want %+v", dry, want)
		}
		for _, id := range append(append([]string{}, due...), kept...) {
			if !h.exists(id) {
				t.Fatalf("run %s is gone after a dry run", id)
			}
		}

		got := h.gc(state.GCParams{Batch: 3}) // several batches, and the cursor across them
		if got != want {
			t.Errorf("CollectGarbage = %+v, want %+v", got, want)
		}
		for _, id := range due {
			if h.exists(id) {
				t.Errorf("due run %s (%s) is still there", id, h.getRun(id).Status)
			}
			if n := len(h.events(id)); n != 0 {
				t.Errorf("run %s removed, %d events left", id, n)
			}
		}
		for _, id := range kept {
			if !h.exists(id) {
				t.Errorf("run %s is gone, want it kept", id)
			}
		}
		if again := h.gc(state.GCParams{}); again != (state.GCReport{}) {
			t.Errorf("a second pass removed %+v, want nothing", again)
		}
		// RetainForever keeps; a shorter age takes what it covers.
		if rep := h.gc(state.GCParams{Succeeded: state.RetainForever, Failed: state.RetainForever, Held: state.RetainForever}); rep.Runs != 0 {
			t.Errorf("forever removed %d runs", rep.Runs)
		}
		if rep := h.gc(state.GCParams{Held: 80 * day}); rep.Runs != 2 {
			t.Errorf("Held 80 days removed %d runs, want the 2 of 89 days", rep.Runs)
		}
	})

	// A run goes with its descendants, only when they all ended; a child
	// never goes on its own.
	t.Run("Children", func(t *testing.T) {
		t.Parallel()
		h := s.retention(t)
		child := func(parent *starflowtype.Run, end string) *starflowtype.Run {
			if end == "queued" {
				return h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild})
			}
			r, l := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, TriggerType: starflowtype.TriggerChild}).ID, runnerA)
			h.runStep(stepKey(r, "", "s"), l, `1`, `{}`)
			if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: r.ID, Lease: l}); err != nil {
				t.Fatal(err)
			}
			return r
		}
		p1 := h.ended("", "wf", "succeeded", `1`)
		c1 := child(p1, "succeeded")
		g1 := child(c1, "succeeded") // a grandchild
		p2 := h.ended("", "wf", "succeeded", `1`)
		c2 := child(p2, "succeeded")
		g2 := child(c2, "queued") // not ended: the whole tree stays
		p3 := h.enqueue(nil)      // a parent that has not ended
		c3 := child(p3, "succeeded")
		h.backdate(10 * day)
		want := h.rowsOf(p1.ID)
		want.Add(h.rowsOf(c1.ID))
		want.Add(h.rowsOf(g1.ID))
		if got := h.gc(state.GCParams{}); got != want {
			t.Errorf("CollectGarbage = %+v, want %+v (the first tree)", got, want)
		}
		for _, id := range []string{p1.ID, c1.ID, g1.ID} {
			if h.exists(id) {
				t.Errorf("run %s of the ended tree is still there", id)
			}
		}
		for _, id := range []string{p2.ID, c2.ID, g2.ID, p3.ID, c3.ID} {
			if !h.exists(id) {
				t.Errorf("run %s is gone, want it kept", id)
			}
		}
	})

	// The runs a batch removes reach the hooks (Change.Removed, in the
	// batch's transaction: a hook's error keeps them), so the mirror can
	// drop them from the warm tier; a dry run, and a pass that removes no
	// run, tell the hooks nothing.
	t.Run("RemovedRunsReachHooks", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, true)
		h := s.retention(t, rec.hook)
		p1 := h.ended("", "wf", "succeeded", `1`)
		c1, l := h.claimStartOwn(h.enqueue(&state.EnqueueRunParams{ParentRunID: p1.ID, TriggerType: starflowtype.TriggerChild}).ID, runnerA)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: c1.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		h.backdate(10 * day)
		kept := h.ended("", "wf", "succeeded", `1`)
		removed := func() []string {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var ids []string
			for _, ch := range rec.changes {
				if len(ch.Removed) > 0 {
					equal(t, "op of a change with Removed", ch.Op, "CollectGarbage")
					ids = append(ids, ch.Removed...)
				}
			}
			slices.Sort(ids)
			return ids
		}
		if rep := h.gc(state.GCParams{DryRun: true}); rep.Runs != 2 {
			t.Fatalf("dry run counted %d runs, want 2", rep.Runs)
		}
		if got := removed(); len(got) != 0 {
			t.Errorf("a dry run told the hooks %v were removed", got)
		}
		rec.setFail("CollectGarbage")
		if _, err := h.a.CollectGarbage(h.ctx(), &state.GCParams{}); !errors.Is(err, errHook) {
			t.Fatalf("CollectGarbage with a failing hook: %v, want the hook's error", err)
		}
		if !h.exists(p1.ID) || !h.exists(c1.ID) {
			t.Fatal("a batch whose hook failed removed its runs")
		}
		rec.setFail("")
		rec.mu.Lock()
		rec.changes = nil
		rec.mu.Unlock()
		if rep := h.gc(state.GCParams{Batch: 1}); rep.Runs != 2 {
			t.Fatalf("CollectGarbage removed %d runs, want the tree of 2", rep.Runs)
		}
		want := []string{p1.ID, c1.ID}
		slices.Sort(want)
		if got := removed(); !slices.Equal(got, want) {
			t.Errorf("Change.Removed = %v, want the tree %v", got, want)
		}
		if !h.exists(kept.ID) {
			t.Fatal("the young run is gone")
		}
		rec.mu.Lock()
		rec.changes = nil
		rec.mu.Unlock()
		if rep := h.gc(state.GCParams{}); rep.Runs != 0 {
			t.Fatalf("a second pass removed %d runs", rep.Runs)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.changes) != 0 {
			t.Errorf("a pass that removed nothing ran the hooks: %s", dump(rec.changes))
		}
	})

	// A blob goes when no checkpoint references it any more and it was
	// untouched for the grace age; a shared one stays while one run does.
	t.Run("Blobs", func(t *testing.T) {
		t.Parallel()
		h := s.retention(t)
		big := func(c string) string { return `"` + strings.Repeat(c, state.BlobThresholdDefault+10) + `"` }
		old := h.ended("", "wf", "succeeded", big("x"))
		gone := h.ended("", "wf", "succeeded", big("y"))
		h.backdate(10 * day)
		shared := h.ended("", "wf", "succeeded", big("x")) // the same blob as old's
		want := h.rowsOf(old.ID)
		want.Add(h.rowsOf(gone.ID))
		want.Blobs = 1 // y's; x stays with shared
		if got := h.gc(state.GCParams{}); got != want {
			t.Errorf("CollectGarbage = %+v, want %+v", got, want)
		}
		cps := h.checkpoints(shared.ID, 0)
		if len(cps) != 1 || string(cps[0].Output) != big("x") {
			t.Fatalf("the shared blob no longer reads back (%d checkpoints)", len(cps))
		}

		// A run removed while its blob is younger than the grace age: the
		// blob stays an orphan until a later pass finds it old enough. A
		// blob written again (x, by shared) counts from that write.
		h.ended("", "wf", "succeeded", big("z"))
		h.backdate(30 * time.Minute)
		got := h.gc(state.GCParams{Succeeded: 10 * time.Minute})
		if got.Runs != 2 || got.Blobs != 0 {
			t.Errorf("CollectGarbage(10 min) = %+v, want runs 2 and no blob: x was written again 30 min ago, z created then", got)
		}
		if got := h.gc(state.GCParams{}); got.Blobs != 0 {
			t.Errorf("a blob younger than the grace age was taken: %+v", got)
		}
		h.backdate(time.Hour)
		if got := h.gc(state.GCParams{DryRun: true}); got.Blobs != 2 {
			t.Errorf("dry run found %d orphan blobs, want x and z", got.Blobs)
		}
		if got := h.gc(state.GCParams{}); got != (state.GCReport{Blobs: 2}) {
			t.Errorf("CollectGarbage = %+v, want the orphans x and z only", got)
		}
	})

	// Consumed waits go once no step instance reads them; pending ones,
	// and those the run's current step still reads, stay. Consumed inbox
	// rows go; unconsumed ones stay. Unfinished runs stay.
	t.Run("WaitsAndInbox", func(t *testing.T) {
		t.Parallel()
		h := s.retention(t)
		// run1: step a waited, was woken and succeeded; step b waits now.
		run1, l1 := h.startOwn(runnerA)
		ka := stepKey(run1, "", "a")
		h.nodeStart(ka, l1, 1)
		wa, _ := h.waitOn(ka, l1, state.RegisterWaitParams{Signal: "go"})
		h.signal(state.SignalParams{RunID: run1.ID, Signal: "go", Payload: json.RawMessage(`1`)})
		_, l1 = h.claimStartOwn(run1.ID, runnerA)
		h.nodeComplete(ka, l1, `1`, `{}`)
		kb := stepKey(run1, "", "b")
		h.nodeStart(kb, l1, 1)
		wb, _ := h.waitOn(kb, l1, state.RegisterWaitParams{Signal: "later"})
		// run2: woken, its step not completed yet; and an early signal.
		run2, l2 := h.startOwn(runnerA)
		kc := stepKey(run2, "", "c")
		h.nodeStart(kc, l2, 1)
		wc, _ := h.waitOn(kc, l2, state.RegisterWaitParams{Signal: "go"})
		h.signal(state.SignalParams{RunID: run2.ID, Signal: "go"})
		early := h.signal(state.SignalParams{RunID: run2.ID, Signal: "early"})
		// run3: a signal that came first, consumed by the registration.
		run3, l3 := h.startOwn(runnerA)
		h.signal(state.SignalParams{RunID: run3.ID, Signal: "x"})
		kd := stepKey(run3, "", "d")
		h.nodeStart(kd, l3, 1)
		wd, _ := h.waitOn(kd, l3, state.RegisterWaitParams{Signal: "x"})
		h.wantWait(wd.ID, starflowtype.WaitWoken, "")

		if got := h.gc(state.GCParams{}); got != (state.GCReport{}) {
			t.Errorf("CollectGarbage of fresh rows = %+v, want nothing", got)
		}
		h.backdate(8 * day)
		want := state.GCReport{Waits: 1, InboxRows: 1}
		if got := h.gc(state.GCParams{DryRun: true}); got != want {
			t.Errorf("dry run = %+v, want %+v", got, want)
		}
		if got := h.gc(state.GCParams{}); got != want {
			t.Errorf("CollectGarbage = %+v, want %+v (wait a, run3's inbox row)", got, want)
		}
		if _, err := h.a.GetWait(h.ctx(), &state.GetWaitParams{ID: wa.ID}); err == nil {
			t.Error("the consumed wait of a succeeded step is still there")
		}
		h.wantWait(wb.ID, starflowtype.WaitPending, "")
		h.wantWait(wc.ID, starflowtype.WaitWoken, "")
		h.wantWait(wd.ID, starflowtype.WaitWoken, "")
		for _, id := range []string{run1.ID, run2.ID, run3.ID} {
			if !h.exists(id) {
				t.Errorf("unfinished run %s is gone", id)
			}
		}
		// The early signal is still in the inbox: a wait registered now
		// gets it.
		if early.Inbox == nil {
			t.Fatal("the early signal did not go to the inbox")
		}
		r2, l2 := h.claimStartOwn(run2.ID, runnerA)
		h.nodeComplete(kc, l2, `1`, `{}`)
		ke := stepKey(r2, "", "e")
		h.nodeStart(ke, l2, 1)
		we, _ := h.waitOn(ke, l2, state.RegisterWaitParams{Signal: "early"})
		h.wantWait(we.ID, starflowtype.WaitWoken, "")
	})

	// Expired receipts and session variables go; live ones stay.
	t.Run("ReceiptsAndSessionVars", func(t *testing.T) {
		t.Parallel()
		h := s.retention(t)
		h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "old", IdempotencyTTL: time.Hour})
		live := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "live", IdempotencyTTL: 10 * day})
		run, l := h.startOwn(runnerA)
		h.sessionSet(run.ID, l, "s", "old", `1`, time.Now().Add(time.Hour))
		h.sessionSet(run.ID, l, "s", "live", `1`, time.Now().Add(10*day))
		h.backdate(2 * time.Hour)
		if got := h.gc(state.GCParams{}); got != (state.GCReport{Receipts: 1}) {
			t.Errorf("CollectGarbage = %+v, want the expired receipt (session variables only with SessionVars)", got)
		}
		if got := h.gc(state.GCParams{SessionVars: true, DryRun: true}); got != (state.GCReport{SessionVars: 1}) {
			t.Errorf("dry run with SessionVars = %+v, want 1 session variable", got)
		}
		if got := h.gc(state.GCParams{SessionVars: true}); got != (state.GCReport{SessionVars: 1}) {
			t.Errorf("CollectGarbage with SessionVars = %+v, want 1 session variable", got)
		}
		if h.sessionGet("s", "live") == nil {
			t.Error("a live session variable is gone")
		}
		again := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "live", IdempotencyTTL: 10 * day})
		equal(t, "run of the live receipt", again.ID, live.ID)
	})
}
