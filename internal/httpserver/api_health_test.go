package httpserver

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// lost is a run of quick in workspace ws (and env) claimed by a runner
// whose lease already expired, in a pool the test engine's runner does not
// serve: the next sweep recovers it.
func (e *apiEnv) lost(ws, env string) *starflowtype.Run {
	e.t.Helper()
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: ws, Env: env})
	r, err := e.eng.Enqueue(ctx, "quick", map[string]any{}, &starflow.EnqueueOptions{Pool: "nobody"})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := e.store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "dead-runner", Pools: []string{"nobody"}, RunID: r.ID, LeaseTTL: -time.Second})
	if err != nil || c == nil {
		e.t.Fatalf("claim of %s: %+v %v", r.ID, c, err)
	}
	if _, err := e.store.OnRunStart(ctx, &state.RunStartParams{RunID: r.ID, Lease: c.Lease()}); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// health reads GET /api/health with key.
func (e *apiEnv) health(key string) *api.HealthReport {
	e.t.Helper()
	a := e.call("GET", "/api/health", key, nil)
	if a.status != 200 {
		e.t.Fatalf("GET /api/health: %d %s", a.status, shortBody(a.body))
	}
	var h api.HealthReport
	a.decode(e.t, &h)
	return &h
}

// TestHealthReport: GET /api/health answers the health of /healthz, the
// live runners from the warm tier's presence, this process's sweep
// passes and the newest recovery events — of the caller's workspace and
// env only (a key without an env: every env of its workspace).
func TestHealthReport(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	staging := e.createKey("alpha", "staging", starflowtype.RoleViewer)
	mine, theirs, other := e.lost("alpha", ""), e.lost("beta", ""), e.lost("alpha", "staging")
	if _, err := e.eng.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var h *api.HealthReport
	deadline := time.Now().Add(10 * time.Second)
	// The presence and the runner's cold row are written as the runner
	// starts.
	for h = e.health(e.keys["alpha/viewer"]); (len(h.Runners) == 0 || h.Runners[0].StartedAt.IsZero()) && time.Now().Before(deadline); h = e.health(e.keys["alpha/viewer"]) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.Status != "ok" || !h.StoreOK || !h.WarmEnabled || h.RunnerID != e.eng.RunnerID() {
		t.Errorf("health fields: %+v", h.Health)
	}
	if len(h.Runners) != 1 || h.Runners[0].ID != e.eng.RunnerID() || h.Runners[0].Source != api.SourceWarm ||
		h.Runners[0].SeenAt.IsZero() || h.Runners[0].StartedAt.IsZero() || h.Runners[0].Concurrency == 0 {
		t.Errorf("runners %+v: want this engine's, from the warm tier, with its start from the cold store", h.Runners)
	}
	if h.Sweeps.LastPassAt.IsZero() || len(h.Sweeps.Passes) != 1 {
		t.Fatalf("sweeps %+v: want the one pass", h.Sweeps)
	}
	// A key without an env sees both of alpha's runs, not beta's.
	var rec []string
	for _, r := range h.Sweeps.Passes[0].Recovered {
		if r.Outcome != starflow.SweepRequeued {
			t.Errorf("recovered %+v: want requeued", r)
		}
		rec = append(rec, r.RunID)
	}
	slices.Sort(rec)
	alpha := []string{mine.ID, other.ID}
	slices.Sort(alpha)
	if !slices.Equal(rec, alpha) {
		t.Errorf("alpha's pass recovered %v: want alpha's runs %v", rec, alpha)
	}
	runsOf := func(evs []*starflowtype.RecoveryEvent) []string {
		var ids []string
		for _, ev := range evs {
			if !slices.Contains(ids, ev.RunID) {
				ids = append(ids, ev.RunID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	if got := runsOf(h.Recoveries); !slices.Equal(got, alpha) || len(h.Recoveries) != 4 || h.Recoveries[0].WorkflowName != "quick" {
		t.Errorf("alpha's recoveries: %d events of runs %v; want 4 of %v", len(h.Recoveries), got, alpha)
	}
	for i, ev := range h.Recoveries {
		if i > 0 && ev.ID >= h.Recoveries[i-1].ID {
			t.Errorf("recoveries not newest first: %d after %d", ev.ID, h.Recoveries[i-1].ID)
		}
	}
	for key, want := range map[string]string{e.keys["beta/viewer"]: theirs.ID, staging: other.ID} {
		h := e.health(key)
		if len(h.Sweeps.Passes) != 1 || len(h.Sweeps.Passes[0].Recovered) != 1 || h.Sweeps.Passes[0].Recovered[0].RunID != want {
			t.Errorf("sweeps as another caller: %+v, want only run %s", h.Sweeps.Passes, want)
		}
		if got := runsOf(h.Recoveries); len(got) != 1 || got[0] != want {
			t.Errorf("recoveries as another caller: runs %v, want only %s", got, want)
		}
	}
	// The Go client reads the same.
	ch, err := client.New(e.url, e.keys["alpha/viewer"]).Health(t.Context())
	if err != nil || len(ch.Recoveries) != 4 || ch.Status != "ok" {
		t.Errorf("client.Health: %v, %+v", err, ch)
	}
}

// TestHealthReportWithoutWarm: without a warm tier the runners come from
// the cold store (workflow_runners), and the lists are empty, not null.
func TestHealthReportWithoutWarm(t *testing.T) {
	t.Parallel()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "cold.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
	h, err := New(Config{Backend: eng, API: &APIConfig{Engine: eng}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &apiEnv{t: t, url: srv.URL, eng: eng, store: store}
	r := e.health("")
	for deadline := time.Now().Add(10 * time.Second); len(r.Runners) == 0 && time.Now().Before(deadline); r = e.health("") {
		time.Sleep(20 * time.Millisecond) // the runner writes its row as it starts
	}
	if r.Warm != starflow.WarmNone || r.WarmEnabled {
		t.Errorf("warm %q enabled %v: want none", r.Warm, r.WarmEnabled)
	}
	if len(r.Runners) != 1 || r.Runners[0].ID != eng.RunnerID() || r.Runners[0].Source != api.SourceCold || r.Runners[0].StartedAt.IsZero() {
		t.Errorf("runners %+v: want this engine's from the cold store", r.Runners)
	}
	a := e.call("GET", "/api/health", "", nil)
	for _, field := range []string{`"recoveries":[]`, `"passes":[]`} {
		if !strings.Contains(string(a.body), field) {
			t.Errorf("the answer has no %s: %s", field, shortBody(a.body))
		}
	}
}
