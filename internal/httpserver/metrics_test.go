package httpserver

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/step"
)

// The workflows of the metrics workload.
var metricsWorkflows = []string{
	// ok succeeds after one step retry, with a step long enough for a
	// lease refresh.
	`name: ok
steps:
  - id: set
    context_set: {a: 1}
  - id: flaky
    flaky: {}
    retry_policy: {max_attempts: 3, initial_interval: 10ms, max_interval: 20ms}
  - id: slow
    slow: {}
`,
	// retrying fails transiently in both of its attempts: one run retry,
	// then a dead letter.
	`name: retrying
max_attempts: 2
steps:
  - id: down
    explode: {}
    retry_policy: {max_attempts: 1}
`,
	// perm fails for good: failed, not retried.
	`name: perm
steps:
  - id: no
    fail: {message: "no"}
`,
	// hold parks at a signal wait until the test signals it.
	`name: hold
steps:
  - id: gate
    wait: {signal: go, timeout: 1h}
  - id: after
    context_set: {done: true}
`,
	// idle and ghost are enqueued in pools no runner serves.
	`name: idle
steps:
  - id: a
    context_set: {a: 1}
`,
	`name: ghost
max_attempts: 2
steps:
  - id: a
    context_set: {a: 1}
`,
}

// TestMetricsScrape: a real engine (runner and maintenance leader) on a
// SQLite file behind the listener with its API runs a mixed workload —
// a run that succeeds after a step retry, one retried then
// dead-lettered, one that fails, one parked at a wait and woken by a
// signal, runs queued in a pool no runner serves, a run whose runner
// vanished recovered by the lease sweep, a forged wake token (401) and an
// unknown route (404) — and /metrics, scraped over HTTP and parsed with
// expfmt, holds every metric with values that agree with the store.
func TestMetricsScrape(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "metrics.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, Maintenance: true, StuckInterval: 50 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, RunRetryMin: 10 * time.Millisecond, RunRetryMax: 20 * time.Millisecond,
		LeaseTTL: 6 * time.Second, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	refreshed := func() bool { return peek(gather(t, eng), "starflow_lease_refreshes_total", "result", "ok") >= 1 }
	steps := map[string]step.Func{
		"flaky": func(_ context.Context, r *step.Request) (any, error) {
			if r.Try == 1 {
				return nil, errors.New("flaky: the first try fails")
			}
			return map[string]any{"try": r.Try}, nil
		},
		"explode": func(context.Context, *step.Request) (any, error) { return nil, errors.New("exploded on purpose") },
		// slow lasts until a lease refresh got through (the heartbeat
		// runs every 100 ms), so the scrape sees one.
		"slow": func(ctx context.Context, _ *step.Request) (any, error) {
			for !refreshed() {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return nil, nil
		},
	}
	for name, fn := range steps {
		if err := eng.RegisterStep(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	for _, src := range metricsWorkflows {
		if _, err := eng.Apply(ctx, "wf.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(sctx)
	})
	h, err := New(Config{Backend: eng, Gatherer: eng.Metrics(), Registerer: eng.Metrics(), API: &APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	// The pools no runner serves: two idle runs, and a ghost run claimed
	// by a runner that vanished at once (a 1 ms lease).
	enqueue := func(name, pool string) *starflowtype.Run {
		t.Helper()
		r, err := eng.Enqueue(ctx, name, nil, &starflow.EnqueueOptions{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	enqueue("idle", "idle")
	enqueue("idle", "idle")
	ghost := enqueue("ghost", "ghost")
	if c, err := store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "vanished", Pools: []string{"ghost"}, RunID: ghost.ID, LeaseTTL: time.Millisecond}); err != nil || c == nil {
		t.Fatalf("claim of the ghost run = %v, %v", c, err)
	}

	var ended []*starflowtype.Run
	for _, name := range []string{"ok", "retrying", "perm"} {
		r := enqueue(name, "")
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		r, err := eng.WaitRun(wctx, r.ID)
		cancel()
		if err != nil {
			t.Fatalf("run of %s: %v", name, err)
		}
		ended = append(ended, r)
	}
	want := map[string]string{"ok": "succeeded", "retrying": "failed", "perm": "failed"}
	for _, r := range ended {
		if string(r.Status) != want[r.WorkflowName] {
			t.Fatalf("run of %s ended %s (%s), want %s", r.WorkflowName, r.Status, r.Error, want[r.WorkflowName])
		}
	}
	hold := enqueue("hold", "")
	waitUntil(t, "the hold run parks", func() bool { return runOf(t, store, hold.ID).Status == starflowtype.RunPaused })
	if a := postStatus(t, srv.URL+"/api/runs/"+hold.ID+"/signal", `{"name":"go"}`); a != http.StatusOK {
		t.Fatalf("signal: %d", a)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	held, err := eng.WaitRun(wctx, hold.ID)
	cancel()
	if err != nil || held.Status != starflowtype.RunSucceeded {
		t.Fatalf("the hold run after its signal: %v, %v", held, err)
	}
	ended = append(ended, held)
	// The sweep recovers the ghost run once its lease expired (the
	// leader's periodic pass or this one): re-queued, attempt 2.
	waitUntil(t, "the sweep re-queues the ghost run", func() bool {
		if _, err := eng.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		return runOf(t, store, ghost.ID).Attempt == 2
	})
	if a := postStatus(t, srv.URL+"/wake/forged-token", ""); a != http.StatusUnauthorized {
		t.Fatalf("forged wake: %d, want 401", a)
	}
	if a := getStatus(t, srv.URL+"/no/such/route"); a != http.StatusNotFound {
		t.Fatalf("unknown route: %d, want 404", a)
	}

	// The leader's queue watch (every 50 ms) sees the idle pool's two
	// runs, the oldest claimable for a while, and the ghost run again.
	var fams map[string]*dto.MetricFamily
	waitUntil(t, "the queue watch counts the idle pool", func() bool {
		fams = scrape(t, srv.URL)
		return peek(fams, "starflow_queue_depth", "pool", "idle") == 2 &&
			peek(fams, "starflow_queue_depth", "pool", "ghost") == 1 &&
			peek(fams, "starflow_queue_oldest_age_seconds", "pool", "idle") > 0
	})
	fams = scrape(t, srv.URL) // the last scrape's own request is counted in this one

	// Runs: started once each (the four the runner executed), ended once
	// each, with the retry and the dead letter.
	for _, r := range ended {
		if got := value(t, fams, "starflow_runs_started_total", "workflow", r.WorkflowName); got != 1 {
			t.Errorf("starflow_runs_started_total{workflow=%q} = %g, want 1", r.WorkflowName, got)
		}
	}
	for _, c := range []struct {
		workflow, status string
		want             float64
	}{{"ok", "succeeded", 1}, {"retrying", "dead_lettered", 1}, {"perm", "failed", 1}, {"hold", "succeeded", 1}} {
		if got := value(t, fams, "starflow_runs_ended_total", "workflow", c.workflow, "status", c.status); got != c.want {
			t.Errorf("starflow_runs_ended_total{workflow=%q,status=%q} = %g, want %g", c.workflow, c.status, got, c.want)
		}
	}
	if started, endedN := sum(fams, "starflow_runs_started_total"), sum(fams, "starflow_runs_ended_total"); started < endedN || endedN != 4 {
		t.Errorf("runs started %g, ended %g; want 4 ended, no more than started", started, endedN)
	}
	if got := value(t, fams, "starflow_run_retries_total", "workflow", "retrying"); got != 1 {
		t.Errorf("starflow_run_retries_total{workflow=retrying} = %g, want 1", got)
	}
	if got := value(t, fams, "starflow_run_retries_total", "workflow", "ghost"); got != 1 {
		t.Errorf("starflow_run_retries_total{workflow=ghost} = %g, want 1 (the sweep's re-queue)", got)
	}

	// Steps: the ledger's rows agree with the tries and the durations.
	var rows, tries int
	for _, r := range ended {
		for a := 1; a <= r.Attempt; a++ {
			sts, err := store.ListSteps(ctx, &state.ListStepsParams{RunID: r.ID, Attempt: a})
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				if st.Attempt != a {
					continue
				}
				if st.Status == starflowtype.StepSucceeded || st.Status == starflowtype.StepFailed || st.Status == starflowtype.StepCancelled {
					rows++
				}
				tries += st.Tries
			}
		}
	}
	if got := histCount(fams, "starflow_step_duration_seconds"); got != uint64(rows) {
		t.Errorf("starflow_step_duration_seconds count = %d, want %d (the step rows that ended)", got, rows)
	}
	if got := sum(fams, "starflow_step_tries_total"); got != float64(tries) {
		t.Errorf("starflow_step_tries_total = %g, want %d (the step rows' tries)", got, tries)
	}
	if got := value(t, fams, "starflow_step_tries_total", "workflow", "ok", "kind", "flaky"); got != 2 {
		t.Errorf("starflow_step_tries_total{ok,flaky} = %g, want 2", got)
	}
	if got := value(t, fams, "starflow_step_retries_total", "workflow", "ok", "kind", "flaky"); got != 1 {
		t.Errorf("starflow_step_retries_total{ok,flaky} = %g, want 1", got)
	}
	if got := sum(fams, "starflow_step_retries_total"); got != 1 {
		t.Errorf("starflow_step_retries_total = %g in all, want 1", got)
	}
	if got := histCount(fams, "starflow_step_duration_seconds", "workflow", "perm", "kind", "fail", "status", "failed"); got != 1 {
		t.Errorf("step durations of perm's failed fail step = %d, want 1", got)
	}
	// The flaky step's duration holds its retry's backoff (10 ms, jitter
	// at least 0.8 ×).
	if s := histSum(fams, "starflow_step_duration_seconds", "workflow", "ok", "kind", "flaky"); s < 0.008 {
		t.Errorf("the flaky step's duration = %g s, want at least its 8 ms backoff", s)
	}

	// Claims: each claim of the runner observed once, on the database clock.
	claims := 0
	for _, r := range ended {
		claims += runOf(t, store, r.ID).ClaimAttempts
	}
	if got := histCount(fams, "starflow_claim_wait_seconds"); got != uint64(claims) {
		t.Errorf("starflow_claim_wait_seconds count = %d, want %d (the runs' claim_attempts)", got, claims)
	}
	if got := histCount(fams, "starflow_claim_duration_seconds", "result", "claimed"); got < 1 {
		t.Errorf("starflow_claim_duration_seconds{result=claimed} count = %d, want at least 1", got)
	}

	// Leases and the sweep.
	if got := value(t, fams, "starflow_lease_refreshes_total", "result", "ok"); got < 1 {
		t.Errorf("starflow_lease_refreshes_total{ok} = %g, want at least 1", got)
	}
	if got := value(t, fams, "starflow_lease_refreshes_total", "result", "failed"); got != 0 {
		t.Errorf("starflow_lease_refreshes_total{failed} = %g, want 0", got)
	}
	if got := sum(fams, "starflow_lease_losses_total"); got != 0 {
		t.Errorf("starflow_lease_losses_total = %g, want 0", got)
	}
	if got := value(t, fams, "starflow_sweep_recoveries_total", "outcome", "requeued"); got != 1 {
		t.Errorf("starflow_sweep_recoveries_total{requeued} = %g, want 1", got)
	}
	if got := value(t, fams, "starflow_sweep_passes_total", "result", "ok"); got < 1 {
		t.Errorf("starflow_sweep_passes_total{ok} = %g, want at least 1", got)
	}

	// Wakes and HTTP.
	if got := value(t, fams, "starflow_wakes_total", "via", "signal", "outcome", "woken"); got != 1 {
		t.Errorf("starflow_wakes_total{signal,woken} = %g, want 1", got)
	}
	if got := value(t, fams, "starflow_wakes_total", "via", "token", "outcome", "invalid_token"); got != 1 {
		t.Errorf("starflow_wakes_total{token,invalid_token} = %g, want 1", got)
	}
	for _, c := range []struct{ route, code string }{
		{"POST /wake/{token...}", "401"}, {routeUnmatched, "404"}, {"POST /api/runs/{id}/signal", "200"}, {"GET /metrics", "200"},
	} {
		if got := value(t, fams, "starflow_http_requests_total", "route", c.route, "code", c.code); got < 1 {
			t.Errorf("starflow_http_requests_total{route=%q,code=%s} = %g, want at least 1", c.route, c.code, got)
		}
	}
	if got, n := histCount(fams, "starflow_http_request_duration_seconds"), sum(fams, "starflow_http_requests_total"); float64(got) != n {
		t.Errorf("starflow_http_request_duration_seconds count = %d, starflow_http_requests_total = %g; want equal", got, n)
	}

	// The store's group commits, and the metrics that were there before.
	if n, s := histCount(fams, "starflow_store_commit_batch_writes"), histSum(fams, "starflow_store_commit_batch_writes"); n == 0 || s < float64(n) {
		t.Errorf("starflow_store_commit_batch_writes: %d batches of %g writes; want some, each of at least one", n, s)
	}
	if n := histCount(fams, "starflow_store_commit_duration_seconds"); n != histCount(fams, "starflow_store_commit_batch_writes") {
		t.Errorf("starflow_store_commit_duration_seconds count %d differs from the batches'", n)
	}
	if got := value(t, fams, "starflow_maintenance_leader"); got != 1 {
		t.Errorf("starflow_maintenance_leader = %g, want 1", got)
	}
	if got := value(t, fams, "starflow_runs_finished_total", "outcome", "succeeded"); got < 2 {
		t.Errorf("starflow_runs_finished_total{succeeded} = %g, want at least 2", got)
	}
	if _, ok := fams["starflow_runs_stuck"]; !ok {
		t.Errorf("starflow_runs_stuck missing")
	}
}

// scrape GETs /metrics and parses the text exposition.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// gather reads the engine's registry directly (inside a step).
func gather(t *testing.T, eng *starflow.Engine) map[string]*dto.MetricFamily {
	fams, err := eng.Metrics().Gather()
	if err != nil {
		t.Error(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// matching are the series of family name whose labels include pairs
// (name, value, name, value, …).
func matching(fams map[string]*dto.MetricFamily, name string, pairs ...string) []*dto.Metric {
	var out []*dto.Metric
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(pairs); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
					found = true
				}
			}
			// An empty label value is the label's absence.
			if !found && pairs[i+1] != "" {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// value is the one counter or gauge series of name with pairs; the test
// fails when there is none or more than one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	t.Helper()
	ms := matching(fams, name, pairs...)
	if len(ms) != 1 {
		t.Errorf("%s%v: %d series, want 1", name, pairs, len(ms))
		return math.NaN()
	}
	if c := ms[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return ms[0].GetGauge().GetValue()
}

// peek is value without failing the test: NaN unless exactly one series
// matches (for polling).
func peek(fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	ms := matching(fams, name, pairs...)
	if len(ms) != 1 {
		return math.NaN()
	}
	if c := ms[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return ms[0].GetGauge().GetValue()
}

// sum adds every counter series of name.
func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	var s float64
	for _, m := range matching(fams, name) {
		s += m.GetCounter().GetValue()
	}
	return s
}

// histCount and histSum add the histogram series of name with pairs.
func histCount(fams map[string]*dto.MetricFamily, name string, pairs ...string) uint64 {
	var n uint64
	for _, m := range matching(fams, name, pairs...) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

func histSum(fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	var s float64
	for _, m := range matching(fams, name, pairs...) {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

func runOf(t *testing.T, store state.Adapter, id string) *starflowtype.Run {
	t.Helper()
	r, err := store.GetRun(context.Background(), &state.GetRunParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitUntil polls cond every 20 ms, for at most a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func postStatus(t *testing.T, url, body string) int {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}
