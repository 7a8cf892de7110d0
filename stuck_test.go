package starflow_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/internal/stucktest"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestStuckReasons (issue 13, "why is it stuck?"): a run in each of the
// ten why-stuck states, made for real (internal/stucktest), has its reason
// in the engine API (Stuck and StuckMany), the HTTP API (GET
// /api/runs/{id} and GET /api/runs, the wire shape {reason, since,
// detail}) and the metrics (starflow_runs_stuck{reason} and the age
// histogram); a running run with a fresh lease and an ended run have
// none; Runners lists the live runners. On a SQLite file and on
// PostgreSQL. The CLI's half is cmd/starflow's TestStuckReasonsCLI.
func TestStuckReasons(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "stuck.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		if err := store.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		testStuckReasons(t, store, stucktest.Options{})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testStuckReasons(t, openPG(t), stucktest.Options{WakeKeys: pgWakeKeys})
	})
}

func testStuckReasons(t *testing.T, store state.Adapter, opts stucktest.Options) {
	f := stucktest.New(t, store, opts)
	ctx := context.Background()
	eng := f.Engine

	// The engine, one run at a time.
	var runs []*starflowtype.Run
	for _, c := range f.Cases {
		r, err := store.GetRun(ctx, &state.GetRunParams{ID: c.RunID})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		st, err := eng.Stuck(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Verify(st); err != nil {
			t.Errorf("Engine.Stuck: %v", err)
		}
	}
	seen := map[starflowtype.StuckReason]bool{}
	for _, c := range f.Cases {
		seen[c.Reason] = true
	}
	for _, r := range starflowtype.StuckReasons() {
		if !seen[r] {
			t.Errorf("no case of reason %s", r)
		}
	}

	// Not stuck: an ended run, and a running run with a fresh lease.
	done := runToEndOn(t, eng, "stuck-manual")
	if st, err := eng.Stuck(ctx, done); err != nil || st != nil {
		t.Errorf("Stuck of a succeeded run = %+v, %v; want nil", st, err)
	}
	busy, err := store.ListRuns(ctx, &state.ListRunsParams{Status: []starflowtype.RunStatus{starflowtype.RunRunning}, WorkspaceID: state.DefaultWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	var healthy *starflowtype.Run
	for _, r := range busy {
		if r.LeasedBy == "busy-runner" {
			healthy = r
		}
	}
	if healthy == nil {
		t.Fatal("the busy runner's blocked run is not running")
	}
	m, err := eng.StuckMany(ctx, append(runs, done, healthy))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if err := c.Verify(m[c.RunID]); err != nil {
			t.Errorf("Engine.StuckMany: %v", err)
		}
	}
	if m[done.ID] != nil || m[healthy.ID] != nil {
		t.Errorf("StuckMany: ended run %+v, healthy running run %+v; want neither", m[done.ID], m[healthy.ID])
	}

	// Runners: the two engines' runners, each with its pools.
	rs, err := eng.Runners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
		if r.ID == "busy-runner" && (!slices.Equal(r.Pools, []string{stucktest.PoolBusy}) || r.Concurrency != 1 || r.WorkspaceID != state.DefaultWorkspace) {
			t.Errorf("busy runner %+v: want pool busy, concurrency 1, workspace default", r)
		}
	}
	if !slices.Equal(ids, []string{"busy-runner", "main-runner"}) {
		t.Errorf("Runners = %v, want busy-runner and main-runner", ids)
	}

	// The HTTP API: detail and listing, through the typed client and as
	// raw JSON.
	handler, err := httpserver.New(httpserver.Config{Backend: eng, Logger: quietLogger(), Gatherer: eng.Metrics(),
		API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	c := client.New(srv.URL, "")
	for _, cs := range f.Cases {
		r, err := c.Run(ctx, cs.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Verify(r.Stuck); err != nil {
			t.Errorf("GET /api/runs/{id}: %v", err)
		}
	}
	page, err := c.Runs(ctx, client.ListRunsOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*api.RunView{}
	for _, r := range page.Runs {
		listed[r.ID] = r
	}
	for _, cs := range f.Cases {
		if r := listed[cs.RunID]; r == nil {
			t.Errorf("GET /api/runs: run %s (%s) not listed", cs.RunID, cs.Name)
		} else if err := cs.Verify(r.Stuck); err != nil {
			t.Errorf("GET /api/runs: %v", err)
		}
	}
	if r := listed[done.ID]; r == nil || r.Stuck != nil {
		t.Errorf("GET /api/runs: the succeeded run %+v, want it listed without stuck", r)
	}
	resp, err := http.Get(srv.URL + "/api/runs/" + f.Case("waiting_signal").RunID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var wire struct {
		ID    string                     `json:"id"`
		Stuck map[string]json.RawMessage `json:"stuck"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range wire.Stuck {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var detail map[string]any
	_ = json.Unmarshal(wire.Stuck["detail"], &detail)
	if !slices.Equal(keys, []string{"detail", "reason", "since"}) || string(wire.Stuck["reason"]) != `"waiting_signal"` ||
		detail["signal"] != "go" || detail["message"] == "" || detail["position"] != nil {
		t.Errorf("GET /api/runs/{id} of the signal run: stuck = %s; want exactly reason, since and detail (signal go, a message, nothing unset)", raw)
	}

	// The metrics: the leader's stuck watch counts every run by reason.
	want := f.Counts()
	eventually(t, "starflow_runs_stuck to count every reason", func() bool {
		got, _ := stuckGauges(t, eng)
		for _, r := range starflowtype.StuckReasons() {
			if got[string(r)] != float64(want[r]) {
				return false
			}
		}
		return true
	})
	scrape := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	text := scrape()
	for _, line := range []string{`starflow_runs_stuck{reason="lease_stale"} 1`, `starflow_runs_stuck{reason="retry_backoff"} 2`,
		`starflow_runs_stuck{reason="queued_behind"} 2`, `starflow_runs_stuck_age_seconds_count{reason="waiting_signal"} 2`} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("GET /metrics has no line %q", line)
		}
	}
	_, ages := stuckGauges(t, eng)
	for _, r := range starflowtype.StuckReasons() {
		if h, ok := ages[string(r)]; !ok || h.count != uint64(want[r]) || h.sum < 0 || h.buckets == 0 {
			t.Errorf("starflow_runs_stuck_age_seconds{reason=%q} = %+v (exported: %v), want %d samples in buckets", r, h, ok, want[r])
		}
	}
}

// runToEndOn enqueues a run of name on eng and waits until it settles.
func runToEndOn(t *testing.T, eng *starflow.Engine, name string) *starflowtype.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := eng.Enqueue(ctx, name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = eng.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	return r
}

// ageHistogram is what the stuck tests read of one age histogram.
type ageHistogram struct {
	count   uint64
	sum     float64
	buckets int
}

// stuckGauges scrapes eng's registry: starflow_runs_stuck by reason, and
// the age histograms by reason.
func stuckGauges(t *testing.T, eng *starflow.Engine) (map[string]float64, map[string]ageHistogram) {
	t.Helper()
	mfs, err := eng.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauges, ages := map[string]float64{}, map[string]ageHistogram{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var reason string
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					reason = l.GetValue()
				}
			}
			switch mf.GetName() {
			case "starflow_runs_stuck":
				gauges[reason] = m.GetGauge().GetValue()
			case "starflow_runs_stuck_age_seconds":
				h := m.GetHistogram()
				ages[reason] = ageHistogram{count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: len(h.GetBucket())}
			}
		}
	}
	return gauges, ages
}

// TestRunnerPresence: a runner writes its workflow_runners row when it
// starts (Engine.Runners lists it, with its pools and concurrency) and
// removes it when it stops cleanly.
func TestRunnerPresence(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{RunnerID: "present", Pools: []string{"gpu"}, Concurrency: 3})
	other := newHarness(t, starflow.Config{})
	ctx := context.Background()
	if rs, err := h.eng.Runners(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("Runners before Start = %v, %v; want none", rs, err)
	}
	h.start()
	var rs []*starflowtype.Runner
	eventually(t, "the runner's row", func() bool {
		var err error
		rs, err = h.eng.Runners(ctx)
		return err == nil && len(rs) == 1
	})
	if r := rs[0]; r.ID != "present" || !slices.Equal(r.Pools, []string{"gpu"}) || r.Concurrency != 3 ||
		r.WorkspaceID != state.DefaultWorkspace || !r.ExpiresAt.After(r.LastSeen) {
		t.Errorf("runner row %+v", r)
	}
	if rs, _ := other.eng.Runners(ctx); len(rs) != 0 {
		t.Errorf("another store's engine lists %v", rs)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.eng.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if rs, err := h.eng.Runners(ctx); err != nil || len(rs) != 0 {
		t.Errorf("Runners after a clean Stop = %v, %v; want none", rs, err)
	}
}
