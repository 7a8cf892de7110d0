package mirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// drainAll reads and applies nothing: it lists the unapplied rows.
func unapplied(t *testing.T, ob state.Outbox) []*state.OutboxRow {
	t.Helper()
	var rows []*state.OutboxRow
	_, err := ob.DrainOutbox(context.Background(), &state.DrainOutboxParams{Limit: 10000}, func(_ context.Context, rs []*state.OutboxRow) ([]int64, error) {
		rows = rs
		return nil, nil
	})
	if err != nil {
		t.Fatalf("DrainOutbox: %v", err)
	}
	return rows
}

// TestSameTransaction: a committed write has its outbox rows; a write
// whose transaction rolls back (a later hook fails, the fence fails)
// leaves none; a write that changes nothing the warm tier shows (a lease
// refresh) appends none.
func TestSameTransaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		ctx := context.Background()
		failPhase := func(_ context.Context, _ state.HookTx, ch *state.Change) error {
			if ch.Op == "RecordPhaseIfChanged" {
				return errors.New("hook fails on purpose")
			}
			return nil
		}
		c := open(mirror.Hook(), failPhase)
		r, err := c.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		rows := unapplied(t, c)
		if len(rows) != 2 || rows[0].Kind != state.OutboxKindEvent || rows[1].Kind != state.OutboxKindRun ||
			rows[1].RunID != r.ID || rows[0].Version != 1 || rows[1].Version != 1 {
			t.Fatalf("rows after EnqueueRun = %s, want the run_queued event row then the run row, version 1", rowsString(rows))
		}
		var e warm.RunEntry
		if err := json.Unmarshal(rows[1].Payload, &e); err != nil || e.Status != "queued" || e.RunID != r.ID || e.Version != 1 {
			t.Fatalf("run row payload %s (%v): want the queued entry, version 1", rows[1].Payload, err)
		}
		r = startRun(t, c, r.ID)
		before := len(unapplied(t, c))
		if err := c.RecordPhaseIfChanged(ctx, &state.RecordPhaseParams{RunID: r.ID, Lease: r.Lease(), Phase: "p1"}); err == nil {
			t.Fatal("RecordPhaseIfChanged with a failing hook succeeded")
		}
		stale := r.Lease()
		stale.Epoch--
		if err := c.OnNodeStart(ctx, &state.NodeStartParams{StepKey: state.StepKey{RunID: r.ID, Attempt: 1, StepID: "a"}, Lease: stale, Kind: "noop", Try: 1}); !errors.Is(err, starflowtype.ErrLeaseLost) {
			t.Fatalf("OnNodeStart with a stale lease = %v, want ErrLeaseLost", err)
		}
		if _, err := c.RefreshLease(ctx, &state.RefreshLeaseParams{RunID: r.ID, Lease: r.Lease(), LeaseTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if n := len(unapplied(t, c)); n != before {
			t.Fatalf("outbox rows went from %d to %d after a rolled-back write, a fenced-out write and a lease refresh; want unchanged", before, n)
		}
		if got, _ := c.GetRun(ctx, &state.GetRunParams{ID: r.ID}); got.Phase != "" {
			t.Fatalf("phase %q after the rolled-back write", got.Phase)
		}
		// A step's start: step row, event row, run row, one version.
		k := state.StepKey{RunID: r.ID, Attempt: 1, StepID: "a"}
		if err := c.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: r.Lease(), Kind: "noop", Try: 1}); err != nil {
			t.Fatal(err)
		}
		rows = unapplied(t, c)
		last := rows[len(rows)-3:]
		if last[0].Kind != state.OutboxKindStep || last[1].Kind != state.OutboxKindEvent || last[2].Kind != state.OutboxKindRun ||
			last[0].Version != last[2].Version || last[1].Version != last[2].Version || last[2].Version <= rows[0].Version {
			t.Fatalf("rows of OnNodeStart = %s, want a step row, an event row, a run row of one new version", rowsString(last))
		}
		var ev warm.EventEntry
		if err := json.Unmarshal(last[1].Payload, &ev); err != nil || ev.EventType != string(starflowtype.EventNodeStart) ||
			ev.NodeID != "a" || ev.RunID != r.ID || ev.ID <= 0 || ev.Attempt != 1 || ev.CreatedAt.IsZero() {
			t.Fatalf("event row payload %s (%v): want the node_start event of step a as stored", last[1].Payload, err)
		}
		if err := json.Unmarshal(last[2].Payload, &e); err != nil || len(e.CurrentSteps) != 1 || e.CurrentSteps[0].StepID != "a" || e.CurrentSteps[0].Status != "running" {
			t.Fatalf("run entry after OnNodeStart %s: want step a running as current", last[1].Payload)
		}
	})
}

// TestDrain: runs executed through the mirror reach the warm store (run
// entries equal to the cold projection, steps, the outbox drained to zero);
// a run row older than the warm entry does not replace it.
func TestDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ws := memory.New()
		m := newMirror(t, c, mirror.Config{Warm: ws})
		var ids []string
		for range 5 {
			ids = append(ids, execRun(t, m, 3).ID)
		}
		// A run left running with its second step current.
		r, err := m.EnqueueRun(context.Background(), &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		r = startRun(t, m, r.ID)
		step(t, m, r, "first")
		k := state.StepKey{RunID: r.ID, Attempt: 1, StepID: "second"}
		if err := m.OnNodeStart(context.Background(), &state.NodeStartParams{StepKey: k, Lease: r.Lease(), Kind: "noop", Try: 1}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		for _, id := range ids {
			if !matches(t, c, ws, id) {
				got, _ := ws.GetRun(context.Background(), id)
				t.Fatalf("warm entry of %s = %+v, want %+v", id, got, coldEntry(t, c, id))
			}
		}
		got, _ := ws.GetRun(context.Background(), r.ID)
		if got.Status != "running" || len(got.CurrentSteps) != 1 || got.CurrentSteps[0].StepID != "second" {
			t.Fatalf("warm entry of the running run = %+v, want running with step second current", got)
		}
		steps, err := ws.ListSteps(context.Background(), ids[0])
		if err != nil || len(steps) != 3 || steps[0].Status != "succeeded" {
			t.Fatalf("warm steps of a finished run = %v, %v; want 3 succeeded", steps, err)
		}
		if n := testutil.ToFloat64(m.Metrics().Applied); n == 0 {
			t.Fatal("starflow_outbox_applied_total is 0 after draining")
		}

		// Version CAS: a warm entry newer than cold's is not replaced by
		// the drain of an older row.
		newer := *got
		newer.Version += 100
		newer.Phase = "from-the-future"
		if _, err := ws.PutRun(context.Background(), &newer, true); err != nil {
			t.Fatal(err)
		}
		if err := m.OnNodeComplete(context.Background(), &state.NodeCompleteParams{StepKey: k, Lease: r.Lease(), Try: 1}); err != nil {
			t.Fatal(err)
		}
		stale := testutil.ToFloat64(m.Metrics().Stale)
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		got, _ = ws.GetRun(context.Background(), r.ID)
		if got.Version != newer.Version || got.Phase != "from-the-future" {
			t.Fatalf("warm entry after an older row drained = %+v, want the newer entry kept", got)
		}
		if testutil.ToFloat64(m.Metrics().Stale) < stale {
			t.Fatal("starflow_outbox_stale_total decreased")
		}
	})
}

// TestWarmOutage: with the warm store failing, runs still succeed, the
// outbox grows and the health answer turns warning then critical; when it
// recovers the outbox drains to zero and every warm entry matches cold.
func TestWarmOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ws := &flaky{Store: memory.New()}
		ws.down.Store(true)
		m := newMirror(t, c, mirror.Config{Warm: ws, WarningAfter: time.Second, CriticalAfter: 3 * time.Second,
			BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
		ctx := context.Background()
		var ids []string
		run := func() {
			r := execRun(t, m, 2)
			if r.Status != starflowtype.RunSucceeded {
				t.Fatalf("run %s ended %s with the warm store down, want succeeded", r.ID, r.Status)
			}
			ids = append(ids, r.ID)
		}
		run()
		h := m.Health(ctx)
		if h.OutboxPending == 0 || h.WarmReachable || h.Warm == mirror.HealthOK {
			t.Fatalf("health with the warm store down = %+v, want rows pending, unreachable, not ok", h)
		}
		// Past WarningAfter (1 s) the level is warning, past CriticalAfter
		// (3 s) critical. A loaded machine may first look after 3 s: the
		// level must then be critical, never ok.
		var seen mirror.Health
		eventually(t, "the oldest row to pass the warning age", func() bool {
			seen = m.Health(ctx)
			return seen.OldestAgeSeconds > 1
		})
		if want := mirror.Level(mirror.Config{WarningAfter: time.Second, CriticalAfter: 3 * time.Second},
			time.Duration(seen.OldestAgeSeconds*float64(time.Second))); seen.Warm != want || want == mirror.HealthOK {
			t.Fatalf("health with the oldest row %.1f s old = %s, want %s", seen.OldestAgeSeconds, seen.Warm, want)
		}
		for range 9 {
			run()
		}
		eventually(t, "health critical", func() bool { return m.Health(ctx).Warm == mirror.HealthCritical })
		if testutil.ToFloat64(m.Metrics().DrainErrors) == 0 {
			t.Fatal("starflow_outbox_drain_errors_total is 0 during the outage")
		}
		if v := testutil.ToFloat64(m.Metrics().Pending.WithLabelValues("gt_30s")) + testutil.ToFloat64(m.Metrics().Pending.WithLabelValues("2s_30s")) +
			testutil.ToFloat64(m.Metrics().Pending.WithLabelValues("1s_2s")) + testutil.ToFloat64(m.Metrics().Pending.WithLabelValues("lt_1s")); v == 0 {
			t.Fatal("starflow_outbox_pending sums to 0 during the outage")
		}
		ws.down.Store(false)
		eventually(t, "the outbox to drain after recovery", func() bool { return pending(t, c) == 0 })
		for _, id := range ids {
			if !matches(t, c, ws, id) {
				t.Fatalf("warm entry of %s does not match cold after recovery", id)
			}
		}
		if h := m.Health(ctx); h.Warm != mirror.HealthOK || h.OutboxPending != 0 || !h.WarmReachable {
			t.Fatalf("health after recovery = %+v, want ok", h)
		}
	})
}

// TestSweepRepairs: the sweep rewrites a deleted and a corrupted warm
// entry, counts both, and leaves matching entries alone; the periodic
// sweep repairs within its interval.
func TestSweepRepairs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ws := memory.New()
		m := newMirror(t, c, mirror.Config{Warm: ws})
		ctx := context.Background()
		done := execRun(t, m, 2)
		r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		running := startRun(t, m, r.ID)
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		// Let the end-of-run reconciliation of done finish first.
		eventually(t, "the reconciliation", func() bool {
			return reconciliations(m) == 1
		})
		if err := ws.DeleteRun(ctx, done.ID); err != nil {
			t.Fatal(err)
		}
		bad, _ := ws.GetRun(ctx, running.ID)
		bad.Status = "succeeded"
		if _, err := ws.PutRun(ctx, bad, true); err != nil {
			t.Fatal(err)
		}
		res, err := m.Sweeper().SweepOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Missing != 1 || res.Diverged != 1 || res.Checked != 2 {
			t.Fatalf("sweep = %+v, want 2 checked, 1 missing, 1 diverged", res)
		}
		for _, id := range []string{done.ID, running.ID} {
			if !matches(t, c, ws, id) {
				t.Fatalf("warm entry of %s not repaired", id)
			}
		}
		cm := m.Metrics().Corrections
		if testutil.ToFloat64(cm.WithLabelValues("missing")) != 1 || testutil.ToFloat64(cm.WithLabelValues("diverged")) != 1 {
			t.Fatal("starflow_warm_corrections_total does not count 1 missing and 1 diverged")
		}
		if res, err := m.Sweeper().SweepOnce(ctx); err != nil || res.Missing+res.Diverged != 0 {
			t.Fatalf("second sweep = %+v, %v; want nothing to repair", res, err)
		}

		// The periodic sweep (a second mirror on the same cold store).
		m2 := newMirror(t, c, mirror.Config{Warm: ws, SweepInterval: 100 * time.Millisecond})
		_ = m2
		if err := ws.DeleteRun(ctx, running.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the periodic sweep to repair", func() bool { return matches(t, c, ws, running.ID) })
	})
}

// TestEndOfRunReconcile: a run's end reconciles it, repairing a warm
// entry the drain could not correct (its version was ahead of cold).
func TestEndOfRunReconcile(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ws := memory.New()
		m := newMirror(t, c, mirror.Config{Warm: ws})
		ctx := context.Background()
		r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		r = startRun(t, m, r.ID)
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		bad, _ := ws.GetRun(ctx, r.ID)
		bad.Version += 1000
		if _, err := ws.PutRun(ctx, bad, true); err != nil {
			t.Fatal(err)
		}
		if _, err := m.OnRunComplete(ctx, &state.RunCompleteParams{RunID: r.ID, Lease: r.Lease()}); err != nil {
			t.Fatal(err)
		}
		// The reconciliation counts its result after its repair is
		// visible: wait for the count (the end of the reconciliation),
		// then check what it repaired.
		corrected := func() float64 { return testutil.ToFloat64(m.Metrics().Reconciles.WithLabelValues("corrected")) }
		eventually(t, "the end-of-run reconciliation to end with a correction", func() bool { return corrected() >= 1 })
		if n := corrected(); n != 1 {
			t.Fatalf("starflow_warm_reconciles_total{result=corrected} = %g, want 1", n)
		}
		if !matches(t, c, ws, r.ID) {
			t.Fatal("the warm entry does not match cold after the reconciliation")
		}
		if got, _ := ws.GetRun(ctx, r.ID); got.Status != "succeeded" {
			t.Fatalf("warm status %s, want succeeded", got.Status)
		}
	})
}

// TestPrune: applied rows are deleted once older than the retention,
// unapplied ones never.
func TestPrune(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ctx := context.Background()
		ws := &flaky{Store: memory.New()}
		d := mirror.NewDrainer(c, mirror.Config{Warm: ws, Retention: 50 * time.Millisecond}, nil)
		execRun(t, c, 2)
		n, err := d.DrainOnce(ctx)
		if err != nil || n == 0 {
			t.Fatalf("DrainOnce = %d, %v", n, err)
		}
		ws.down.Store(true)
		execRun(t, c, 1) // rows that stay unapplied
		if _, err := d.DrainOnce(ctx); !errors.Is(err, errDown) {
			t.Fatalf("DrainOnce with the warm store down = %v, want its error", err)
		}
		left := pending(t, c)
		time.Sleep(100 * time.Millisecond)
		pruned, err := d.Prune(ctx)
		if err != nil || pruned != int64(n) {
			t.Fatalf("Prune = %d, %v; want the %d applied rows", pruned, err, n)
		}
		if p := pending(t, c); p != left || p == 0 {
			t.Fatalf("pending after prune = %d, want %d (unapplied rows kept)", p, left)
		}
	})
}

// TestNullstoreDirect: over a non-durable adapter the mirror writes the
// warm store directly.
func TestNullstoreDirect(t *testing.T) {
	ws := memory.New()
	m := newMirror(t, nullstore.New(), mirror.Config{Warm: ws})
	r, err := m.EnqueueRun(context.Background(), &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ws.GetRun(context.Background(), r.ID)
	if err != nil || got.Status != "queued" {
		t.Fatalf("warm entry = %+v, %v; want the queued run", got, err)
	}
	if h := m.Health(context.Background()); h.Warm != mirror.HealthOK || !h.WarmReachable {
		t.Fatalf("health = %+v, want ok", h)
	}
	if m.Drainer() != nil || m.Sweeper() != nil {
		t.Fatal("a direct-mode mirror has a drainer or sweeper")
	}
}

// TestMetricsAndHealthShape: the collectors register under the contract
// names, a second registration fails with a clear error, and Health
// encodes with the contract's JSON fields.
func TestMetricsAndHealthShape(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := mirror.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := mirror.NewMetrics(reg); err == nil || !strings.Contains(err.Error(), "mirror: register metrics") {
		t.Fatalf("second registration: %v, want a registration error", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{"starflow_outbox_pending", "starflow_outbox_oldest_age_seconds", "starflow_warm_corrections_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not registered (have %v)", want, names)
		}
	}
	b, _ := json.Marshal(mirror.Health{Warm: "ok", OutboxPending: 3, OldestAgeSeconds: 1.5, WarmReachable: true})
	if string(b) != `{"warm":"ok","outbox_pending":3,"oldest_age_seconds":1.5,"warm_reachable":true}` {
		t.Fatalf("Health JSON = %s", b)
	}
	if _, err := mirror.New(nullstore.New(), mirror.Config{}); err == nil || !strings.Contains(err.Error(), "Warm is required") {
		t.Fatalf("New without Warm: %v", err)
	}
	cfg := mirror.Config{WarningAfter: time.Second, CriticalAfter: 3 * time.Second}
	for d, want := range map[time.Duration]string{0: "ok", time.Second: "ok", 2 * time.Second: "warning", 4 * time.Second: "critical"} {
		if got := mirror.Level(cfg, d); got != want {
			t.Errorf("Level(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestBulkEndedSteps: the steps a lease sweep fails and a cancellation
// cancels in bulk reach the warm tier too.
func TestBulkEndedSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		c := open(mirror.Hook())
		ws := memory.New()
		m := newMirror(t, c, mirror.Config{Warm: ws})
		ctx := context.Background()
		stepStatus := func(runID, stepID string, attempt int) string {
			steps, err := ws.ListSteps(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				if s.StepID == stepID && s.Attempt == attempt {
					return s.Status
				}
			}
			return ""
		}
		// Lost: a short lease, a running step, the sweep.
		r, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		lost, err := m.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r1", LeaseTTL: 20 * time.Millisecond, RunID: r.ID})
		if err != nil || lost == nil {
			t.Fatalf("ClaimRun = %v, %v", lost, err)
		}
		k := state.StepKey{RunID: r.ID, Attempt: lost.Attempt, StepID: "a"}
		if err := m.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: lost.Lease(), Kind: "noop", Try: 1}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "step a running in warm", func() bool { return stepStatus(r.ID, "a", 1) == "running" })
		time.Sleep(50 * time.Millisecond)
		swept, err := m.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{})
		if err != nil || len(swept) != 1 {
			t.Fatalf("ExpireOldLeases = %v, %v; want the run", swept, err)
		}
		eventually(t, "step a failed in warm", func() bool { return stepStatus(r.ID, "a", 1) == "failed" })
		eventually(t, "the outbox to drain", func() bool { return pending(t, c) == 0 })
		if !matches(t, c, ws, r.ID) {
			t.Fatal("warm entry of the swept run does not match cold")
		}

		// Cancelled: a running step, cancel requested, the runner ends it.
		r2, err := m.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		run := startRun(t, m, r2.ID)
		k = state.StepKey{RunID: r2.ID, Attempt: run.Attempt, StepID: "b"}
		if err := m.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: run.Lease(), Kind: "noop", Try: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.CancelRun(ctx, &state.CancelRunParams{RunID: r2.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.OnRunCancelled(ctx, &state.RunCancelledParams{RunID: r2.ID, Lease: run.Lease()}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "step b cancelled in warm", func() bool { return stepStatus(r2.ID, "b", run.Attempt) == "cancelled" })
		eventually(t, "the cancelled run in warm", func() bool { return matches(t, c, ws, r2.ID) })
	})
}
