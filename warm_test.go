package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// newWarmHarness is an engine on a fresh SQLite file opened with the
// mirror's hook, and an in-process warm store.
func newWarmHarness(t *testing.T, cfg starflow.Config) (*harness, *memory.Store) {
	t.Helper()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db"),
		Synchronous: sqlitestore.SynchronousNormal, Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws := memory.New()
	t.Cleanup(func() { ws.Close() })
	cfg.Store, cfg.Warm = store, ws
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.RunRetryMin == 0 {
		cfg.RunRetryMin, cfg.RunRetryMax = 10*time.Millisecond, 50*time.Millisecond
	}
	if cfg.WarmOptions.DrainPoll == 0 {
		cfg.WarmOptions.DrainPoll = 20 * time.Millisecond
	}
	cfg.Pools = append(cfg.Pools, "blue")
	eng, err := starflow.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: store, eng: eng}, ws
}

// coldVersion is workflow_runs.mirror_version, the version warm entries
// carry.
func coldVersion(t *testing.T, h *harness, runID string) int64 {
	t.Helper()
	var v int64
	if err := h.store.DB().QueryRow(`SELECT mirror_version FROM workflow_runs WHERE id = ?`, runID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWarmTierLive: with a warm store, a finished run's warm entry matches
// the cold run (status, phase, version); a step's progress is in warm and
// nowhere in cold; the runner's presence lists its pools and runs held; the
// health answer is ok with an empty outbox; /metrics names the drift
// signals and the run counters.
func TestWarmTierLive(t *testing.T) {
	h, ws := newWarmHarness(t, starflow.Config{WarmOptions: starflow.WarmOptions{PresenceInterval: 50 * time.Millisecond}})
	release := make(chan struct{})
	reported := make(chan struct{})
	h.eng.RegisterStep("slow", func(ctx context.Context, req *step.Request) (any, error) {
		req.Progress(0.25, "a quarter of the way")
		close(reported)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		req.Progress(1, "done")
		return "ok", nil
	})
	h.start()
	ctx := context.Background()
	d := h.apply("name: live\nsteps:\n  - id: first\n    context_set: {x: 1}\n  - id: work\n    slow: {}\n")
	run, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-reported
	eventually(t, "live progress 0.25 and a running warm entry with the current step", func() bool {
		ps, err := h.eng.LiveProgress(ctx, run.ID)
		if err != nil || len(ps) != 1 || ps[0].Fraction != 0.25 || ps[0].StepID != "work" {
			return false
		}
		e, err := h.eng.LiveRun(ctx, run.ID)
		return err == nil && e.Status == "running" && len(e.CurrentSteps) == 1 && e.CurrentSteps[0].StepID == "work"
	})
	eventually(t, "presence with one run held", func() bool {
		ps, err := h.eng.LiveRunners(ctx)
		return err == nil && len(ps) == 1 && ps[0].RunnerID == h.eng.RunnerID() && ps[0].RunsHeld == 1 &&
			len(ps[0].Pools) == 1 && ps[0].Pools[0] == "blue"
	})
	close(release)
	final := wait(t, h.eng, run.ID)
	if final.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s", final.Status)
	}
	eventually(t, "the warm entry to match the cold run", func() bool {
		e, err := h.eng.LiveRun(ctx, run.ID)
		return err == nil && e.Status == string(final.Status) && e.Phase == final.Phase &&
			e.Version == coldVersion(t, h, run.ID) && len(e.CurrentSteps) == 0
	})
	// The live events feed ends equal to the cold events (ids, types).
	coldEvs, err := h.eng.Store().ListEvents(ctx, &state.ListEventsParams{RunID: run.ID})
	if err != nil || len(coldEvs) == 0 {
		t.Fatalf("cold events: %d, %v", len(coldEvs), err)
	}
	eventually(t, "the live events to equal the cold events", func() bool {
		evs, err := h.eng.LiveEvents(ctx, run.ID, 0)
		if err != nil || len(evs) != len(coldEvs) {
			return false
		}
		for i, e := range evs {
			if e.ID != coldEvs[i].ID || e.EventType != string(coldEvs[i].Type) || e.NodeID != coldEvs[i].NodeID {
				return false
			}
		}
		return true
	})
	if evs, err := h.eng.LiveEvents(ctx, run.ID, coldEvs[len(coldEvs)-2].ID); err != nil || len(evs) != 1 || evs[0].ID != coldEvs[len(coldEvs)-1].ID {
		t.Fatalf("LiveEvents after the next-to-last id = %v, %v; want the last event", evs, err)
	}
	if ps, _ := ws.ListProgress(ctx, run.ID); len(ps) != 1 || ps[0].Fraction != 1 || ps[0].Message != "done" {
		t.Fatalf("latest progress in warm: %+v", ps)
	}
	// Progress never reaches the cold store.
	if coldContains(t, h, "slow: {}") == "" {
		t.Fatal("coldContains does not find the definition's source")
	}
	if where := coldContains(t, h, "quarter of the way"); where != "" {
		t.Fatalf("a progress message reached the cold store: %s", where)
	}
	eventually(t, "runs held back to 0 in presence", func() bool {
		ps, err := h.eng.LiveRunners(ctx)
		return err == nil && len(ps) == 1 && ps[0].RunsHeld == 0
	})

	hl := h.eng.Health(ctx)
	if hl.Status != "ok" || !hl.StoreOK || hl.Warm != starflow.WarmOK || !hl.WarmEnabled || !hl.WarmReachable || hl.OutboxPending != 0 {
		t.Fatalf("health: %+v", hl)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(h.eng.Metrics(), promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, name := range []string{"starflow_outbox_pending{", "starflow_outbox_oldest_age_seconds ", "starflow_warm_corrections_total{",
		`starflow_runs_finished_total{outcome="succeeded"} 1`, "starflow_runner_runs_held 0"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
	// Stop withdraws the presence.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.eng.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the presence to be withdrawn", func() bool {
		ps, err := ws.ListPresence(ctx)
		return err == nil && len(ps) == 0
	})
}

// TestWarmTierOff: without a warm store, live reads say ErrNoWarm and the
// health answer is ok with the warm tier disabled.
func TestWarmTierOff(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	ctx := context.Background()
	if _, err := h.eng.LiveRun(ctx, "x"); !errors.Is(err, starflow.ErrNoWarm) {
		t.Fatalf("LiveRun: %v", err)
	}
	if _, err := h.eng.LiveRunners(ctx); !errors.Is(err, starflow.ErrNoWarm) {
		t.Fatalf("LiveRunners: %v", err)
	}
	if _, err := h.eng.LiveProgress(ctx, "x"); !errors.Is(err, starflow.ErrNoWarm) {
		t.Fatalf("LiveProgress: %v", err)
	}
	if _, err := h.eng.LiveEvents(ctx, "x", 0); !errors.Is(err, starflow.ErrNoWarm) {
		t.Fatalf("LiveEvents: %v", err)
	}
	hl := h.eng.Health(ctx)
	if hl.Status != "ok" || hl.Warm != starflow.WarmNone || hl.WarmEnabled || hl.WarmReachable {
		t.Fatalf("health: %+v", hl)
	}
	h.store.Close()
	if hl := h.eng.Health(ctx); hl.Status != "unavailable" || hl.StoreOK || hl.StoreError == "" {
		t.Fatalf("health with the store closed: %+v", hl)
	}
}

func TestWarmOptionsRejected(t *testing.T) {
	for _, o := range []starflow.WarmOptions{
		{HealthWarning: 5 * time.Second, HealthCritical: time.Second},
		{DrainPoll: -time.Second},
		{PresenceInterval: time.Second, PresenceTTL: time.Second},
	} {
		_, err := starflow.New(starflow.Config{Store: openSQLite(t), Warm: memory.New(), WarmOptions: o})
		if err == nil || !strings.Contains(err.Error(), "WarmOptions") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func openSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "s.db"), Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// coldView is everything run detail, history and the ledger show of a
// run, as JSON: what must not depend on the warm tier.
func coldView(t *testing.T, eng *starflow.Engine, runID string) string {
	t.Helper()
	ctx := context.Background()
	s := eng.Store()
	run, err := s.GetRun(ctx, &state.GetRunParams{ID: runID})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.ListEvents(ctx, &state.ListEventsParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListRuns(ctx, &state.ListRunsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"run": run, "steps": steps, "events": events, "checkpoints": cps, "list": list})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWarmAuthority (issue 6, Acceptance): with the warm store corrupted,
// then stopped, run detail, history (list), the ledger (steps, events,
// checkpoints) answer byte for byte as before, and a resume behaves as a
// resume with a healthy warm tier; live reads reflect the corrupted warm
// entry, then fail when the store is stopped; runs still succeed and the
// outbox keeps their rows.
func TestWarmAuthority(t *testing.T) {
	h, ws := newWarmHarness(t, starflow.Config{})
	var broken atomic.Bool
	broken.Store(true)
	h.eng.RegisterStep("flaky", func(context.Context, *step.Request) (any, error) {
		if broken.Load() {
			return nil, errors.New("downstream unavailable")
		}
		return map[string]any{"ok": true}, nil
	})
	h.start()
	ctx := context.Background()
	const held = "name: held\nrecovery_mode: manual\nsteps:\n  - id: one\n    context_set: {a: 1}\n  - id: two\n    flaky: {}\n    retry_policy: {max_attempts: 1}\n"
	a := h.runToEnd(held, nil)
	b := h.runToEnd(held, nil)
	ok := h.runToEnd("name: fine\nsteps:\n  - id: one\n    context_set: {a: 1}\n", nil)
	for _, r := range []*starflowtype.Run{a, b} {
		if r.Status != starflowtype.RunInterrupted {
			t.Fatalf("setup: %s", r.Status)
		}
	}
	eventually(t, "the outbox to drain", func() bool { return h.eng.Health(ctx).OutboxPending == 0 })

	// Resume a with a healthy warm tier.
	broken.Store(false)
	if _, err := h.eng.Resume(ctx, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	resumedA := wait(t, h.eng, a.ID)

	ids := []string{a.ID, b.ID, ok.ID}
	before := map[string]string{}
	for _, id := range ids {
		before[id] = coldView(t, h.eng, id)
	}

	// Corrupt: a wrong status and version on one, another deleted.
	bad := &warm.RunEntry{RunID: ok.ID, Status: "failed", Phase: "bogus", Version: 1 << 40}
	if _, err := ws.PutRun(ctx, bad, true); err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteRun(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if e, err := h.eng.LiveRun(ctx, ok.ID); err != nil || e.Status != "failed" || e.Phase != "bogus" {
		t.Fatalf("live read does not reflect the warm tier: %+v %v", e, err)
	}
	if _, err := h.eng.LiveRun(ctx, b.ID); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("live read of a deleted warm entry: %v", err)
	}
	for _, id := range ids {
		if got := coldView(t, h.eng, id); got != before[id] {
			t.Fatalf("run %s: cold reads changed with the warm tier corrupted:\nbefore %s\nafter  %s", id, before[id], got)
		}
	}

	// Stop the warm store.
	ws.Close()
	if _, err := h.eng.LiveRun(ctx, ok.ID); err == nil {
		t.Fatal("live read with the warm store stopped: no error")
	}
	for _, id := range ids {
		if got := coldView(t, h.eng, id); got != before[id] {
			t.Fatalf("run %s: cold reads changed with the warm tier stopped:\nbefore %s\nafter  %s", id, before[id], got)
		}
	}
	// Resume b with the warm tier down: the same result as a's.
	if _, err := h.eng.Resume(ctx, b.ID, nil); err != nil {
		t.Fatalf("resume with the warm store stopped: %v", err)
	}
	resumedB := wait(t, h.eng, b.ID)
	if resumedB.Status != resumedA.Status || resumedB.Attempt != resumedA.Attempt || string(resumedB.Output) != string(resumedA.Output) {
		t.Fatalf("resume with warm down: %s attempt %d output %s; with warm up: %s attempt %d output %s",
			resumedB.Status, resumedB.Attempt, resumedB.Output, resumedA.Status, resumedA.Attempt, resumedA.Output)
	}
	if la, lb := ledgerShape(h.steps(a.ID)), ledgerShape(h.steps(b.ID)); la != lb {
		t.Fatalf("ledger after resume: warm down %s, warm up %s", lb, la)
	}
	hl := h.eng.Health(ctx)
	if hl.Status != "ok" || !hl.StoreOK || hl.WarmReachable || hl.Warm == starflow.WarmOK || hl.OutboxPending == 0 {
		t.Fatalf("health with the warm store stopped: %+v", hl)
	}
}

// ledgerShape is a ledger without ids and times: attempt, step, status,
// tries per row.
func ledgerShape(steps []*starflowtype.Step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(strings.Join([]string{string(rune('0' + s.Attempt)), s.StepID, string(s.Status)}, "/"))
		b.WriteString(" ")
	}
	return b.String()
}

// coldContains names the first table of the SQLite store holding a value
// that contains needle ("" when none).
func coldContains(t *testing.T, h *harness, needle string) string {
	t.Helper()
	db := h.store.DB()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	for _, table := range tables {
		rs, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				var text string
				switch x := v.(type) {
				case string:
					text = x
				case []byte:
					text = string(x)
				}
				if strings.Contains(text, needle) {
					rs.Close()
					return table + "." + cols[i]
				}
			}
		}
		rs.Close()
	}
	if len(tables) < 5 {
		t.Fatalf("only %d tables in the store: %v", len(tables), tables)
	}
	return ""
}

// TestWarmSweepMemory: with Maintenance, the hash sweep corrects a warm
// entry corrupted by hand and one deleted by hand (memory store), and
// counts both in starflow_warm_corrections_total.
func TestWarmSweepMemory(t *testing.T) {
	h, ws := newWarmHarness(t, starflow.Config{Maintenance: true,
		WarmOptions: starflow.WarmOptions{HashSweepInterval: 100 * time.Millisecond}})
	h.start()
	ctx := context.Background()
	a := h.runToEnd("name: one\nsteps:\n  - id: a\n    context_set: {x: 1}\n", nil)
	b := h.runToEnd("name: one\nsteps:\n  - id: a\n    context_set: {x: 1}\n", nil)
	matches := func(id string) bool {
		e, err := ws.GetRun(ctx, id)
		return err == nil && e.Status == "succeeded" && e.Version == coldVersion(t, h, id)
	}
	eventually(t, "warm to match cold", func() bool { return matches(a.ID) && matches(b.ID) })
	corrections := func() float64 {
		mfs, err := h.eng.Metrics().Gather()
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, mf := range mfs {
			if mf.GetName() == "starflow_warm_corrections_total" {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
	before := corrections()
	e, _ := ws.GetRun(ctx, a.ID)
	e.Status, e.Version = "running", e.Version+7
	if _, err := ws.PutRun(ctx, e, true); err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteRun(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if matches(a.ID) || matches(b.ID) {
		t.Fatal("the corruption did not take")
	}
	eventually(t, "the sweep to correct both entries", func() bool { return matches(a.ID) && matches(b.ID) })
	eventually(t, "two corrections counted", func() bool { return corrections() >= before+2 })
}
