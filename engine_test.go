package starflow_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

func TestLinearRunLedger(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: linear
steps:
  - id: a
    context_set: {x: "${{ input.n + 1 }}"}
  - id: b
    context_set: {y: "${{ variables.x * 2 }}"}
  - id: c
    context_set: {z: "${{ steps.b.output.y + 1 }}"}
output: "${{ variables }}"
`, map[string]any{"n": 1})
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil || out["z"] != float64(5) {
		t.Fatalf("output %s", run.Output)
	}
	steps := h.steps(run.ID)
	if len(steps) != 3 {
		t.Fatalf("want 3 step rows, got %d", len(steps))
	}
	for i, s := range steps {
		if s.StepID != []string{"a", "b", "c"}[i] || s.Status != starflowtype.StepSucceeded || s.Tries != 1 || s.Kind != "context_set" {
			t.Errorf("step %d: %+v", i, s)
		}
	}
	cps := h.checkpoints(run.ID)
	if len(cps) != 3 {
		t.Fatalf("checkpoint count %d != succeeded steps 3", len(cps))
	}
	// Checkpoints are deltas: only the keys each step changed.
	if string(cps[1].Context) != `{"y":4}` {
		t.Errorf("checkpoint b context = %s", cps[1].Context)
	}
	want := []string{"run_queued", "run_claimed", "run_started",
		"node_start:a", "node_complete:a", "node_start:b", "node_complete:b", "node_start:c", "node_complete:c", "run_succeeded"}
	if got := eventTypes(h.events(run.ID)); !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	if run.ClaimState != starflowtype.ClaimComplete || run.LeasedBy != "" || run.LeaseEpoch != 1 || run.Attempt != 1 {
		t.Errorf("run row: %+v", run)
	}
}

func TestWhenSkipped(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: skipping
steps:
  - id: a
    context_set: {big: "${{ input.n > 10 }}"}
  - id: discount
    when: "${{ variables.big }}"
    context_set: {d: 5}
  - id: c
    context_set: {had_discount: "${{ has(steps.discount.output) }}", status: "${{ steps.discount.status }}"}
`, map[string]any{"n": 1})
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	steps := h.steps(run.ID)
	if len(steps) != 3 || steps[1].Status != starflowtype.StepSkipped {
		t.Fatalf("steps %+v", steps)
	}
	if n := len(h.checkpoints(run.ID)); n != 2 {
		t.Fatalf("checkpoints %d, want 2 (skipped steps do not advance)", n)
	}
	if string(run.Output) != `{"had_discount":false,"status":"skipped"}` {
		t.Fatalf("output %s", run.Output)
	}
	if !strings.Contains(strings.Join(eventTypes(h.events(run.ID)), " "), "node_skipped:discount") {
		t.Fatal("no node_skipped event")
	}
}

// flaky answers 503 `failures` times, then 200, recording every request.
type flaky struct {
	mu       sync.Mutex
	failures int
	status   int
	keys     []string
	fencing  []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	f.fencing = append(f.fencing, r.Header.Get("Starflow-Fencing-Token"))
	if len(f.keys) <= f.failures {
		st := f.status
		if st == 0 {
			st = http.StatusServiceUnavailable
		}
		http.Error(w, "try later", st)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"ok": true, "count": 3}`))
}

func TestServiceCallRetriesWithStableIdempotencyKey(t *testing.T) {
	srv := &flaky{failures: 2}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: fetch
steps:
  - id: get
    service_call: {url: "${{ input.url + '/data' }}"}
    retry_policy: {max_attempts: 3, initial_interval: 10ms}
    output: "${{ output.body }}"
`, map[string]any{"url": ts.URL})
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	if string(run.Output) != `{"count":3,"ok":true}` {
		t.Fatalf("output %s", run.Output)
	}
	if len(srv.keys) != 3 {
		t.Fatalf("%d requests, want 3", len(srv.keys))
	}
	want := run.ID + "//get"
	for i, k := range srv.keys {
		if k != want {
			t.Errorf("request %d Idempotency-Key %q, want %q", i, k, want)
		}
		if srv.fencing[i] != run.ID+"/1" {
			t.Errorf("request %d fencing token %q", i, srv.fencing[i])
		}
	}
	steps := h.steps(run.ID)
	if len(steps) != 1 || steps[0].Tries != 3 || steps[0].Status != starflowtype.StepSucceeded {
		t.Fatalf("ledger %+v", steps)
	}
	got := strings.Join(eventTypes(h.events(run.ID)), " ")
	if !strings.Contains(got, "node_start:get node_retry:get node_start:get node_retry:get node_start:get node_complete:get") {
		t.Fatalf("events %s", got)
	}
}

func TestServiceCall4xxFailsAtOnce(t *testing.T) {
	srv := &flaky{failures: 100, status: http.StatusBadRequest}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: bad-request
steps:
  - id: call
    service_call: {url: "${{ input.url }}", method: POST, body: {a: 1}}
  - id: after
    context_set: {x: 1}
`, map[string]any{"url": ts.URL})
	if run.Status != starflowtype.RunFailed || run.DeadLettered || run.Attempt != 1 || len(srv.keys) != 1 {
		t.Fatalf("run %s attempt %d dead %v requests %d", run.Status, run.Attempt, run.DeadLettered, len(srv.keys))
	}
	if !strings.Contains(run.Error, "400") {
		t.Fatalf("error %q", run.Error)
	}
	steps := h.steps(run.ID)
	if len(steps) != 2 || steps[0].Status != starflowtype.StepFailed || steps[1].Status != starflowtype.StepSkipped {
		t.Fatalf("ledger %+v %+v", steps[0], steps[1])
	}
}

func TestTransientFailureRetriesRunThenDeadLetters(t *testing.T) {
	srv := &flaky{failures: 1000}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: always-503
max_attempts: 2
steps:
  - id: call
    service_call: {url: "${{ input.url }}"}
    retry_policy: {max_attempts: 2, initial_interval: 1ms}
`, map[string]any{"url": ts.URL})
	if run.Status != starflowtype.RunFailed || !run.DeadLettered || run.Attempt != 2 {
		t.Fatalf("run %s attempt %d dead %v: %s", run.Status, run.Attempt, run.DeadLettered, run.Error)
	}
	if len(srv.keys) != 4 {
		t.Fatalf("%d requests, want 2 tries × 2 attempts", len(srv.keys))
	}
	got := strings.Join(eventTypes(h.events(run.ID)), " ")
	for _, w := range []string{"run_interrupted", "run_failed", "run_dead_lettered"} {
		if !strings.Contains(got, w) {
			t.Errorf("no %s in %s", w, got)
		}
	}
	if run.LeaseEpoch != 2 {
		t.Errorf("lease epoch %d, want 2 (one claim per attempt)", run.LeaseEpoch)
	}
}

func TestFailStep(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: failing
steps:
  - id: check
    fail: {message: "${{ 'order ' + input.id + ' is not valid' }}"}
  - id: never
    context_set: {x: 1}
`, map[string]any{"id": "o-1"})
	if run.Status != starflowtype.RunFailed || run.DeadLettered {
		t.Fatalf("run %+v", run)
	}
	if !strings.Contains(run.Error, "order o-1 is not valid") {
		t.Fatalf("error %q", run.Error)
	}
}

func TestExpressionErrorFailsRunClearly(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: expr-error
steps:
  - id: a
    context_set: {x: "${{ input.missing.deeper }}"}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 {
		t.Fatalf("run %s attempt %d", run.Status, run.Attempt)
	}
	if !strings.Contains(run.Error, "context_set.x") || !strings.Contains(run.Error, "missing") {
		t.Fatalf("error %q", run.Error)
	}
}

func TestInputSchemaOnEnqueue(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	d := h.apply(`
name: typed
input_schema:
  type: object
  required: [sku]
  properties: {sku: {type: string}}
steps:
  - id: a
    context_set: {x: 1}
`)
	_, err := h.eng.Enqueue(context.Background(), d.Name, map[string]any{"qty": 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "sku") {
		t.Fatalf("want an input_schema error naming sku, got %v", err)
	}
	if _, err := h.eng.Enqueue(context.Background(), "nope", nil, nil); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
}

// recordStep registers a custom step that inserts one row per execution
// into a side_effects table of the same database.
func recordStep(t *testing.T, h *harness, block <-chan struct{}) *atomic.Int64 {
	t.Helper()
	db := h.store.DB()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS side_effects (run_id TEXT, step_id TEXT, try INTEGER, epoch TEXT, label TEXT)`); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	err := h.eng.RegisterStep("record", func(ctx context.Context, req *step.Request) (any, error) {
		if block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		label, _ := req.Input.(map[string]any)["label"].(string)
		if _, err := db.ExecContext(ctx, `INSERT INTO side_effects VALUES (?, ?, ?, ?, ?)`, req.RunID, req.StepID, req.Try, req.FencingToken, label); err != nil {
			return nil, err
		}
		n.Add(1)
		return map[string]any{"label": label, "key": req.IdempotencyKey}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &n
}

func countSideEffects(t *testing.T, db *sql.DB, runID string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM side_effects WHERE run_id = ?`, runID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCustomStep(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	h.start()
	run := h.runToEnd(`
name: custom
steps:
  - id: one
    record: {label: "${{ 'hello ' + input.who }}"}
  - id: two
    record: {label: "${{ steps.one.output.label + '!' }}"}
`, map[string]any{"who": "world"})
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	if string(run.Output) != `{"key":"`+run.ID+`//two","label":"hello world!"}` {
		t.Fatalf("output %s", run.Output)
	}
	if n := countSideEffects(t, h.store.DB(), run.ID); n != 2 {
		t.Fatalf("side effects %d", n)
	}
	if err := h.eng.RegisterStep("record", func(context.Context, *step.Request) (any, error) { return nil, nil }); err == nil {
		t.Fatal("duplicate registration accepted")
	}
	if err := h.eng.RegisterStep("service_call", func(context.Context, *step.Request) (any, error) { return nil, nil }); err == nil {
		t.Fatal("built-in name accepted")
	}
}

func TestCustomStepPanicFailsRunNotProcess(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.eng.RegisterStep("boom", func(context.Context, *step.Request) (any, error) { panic("kaboom") })
	h.start()
	run := h.runToEnd("name: panicky\nsteps:\n  - id: x\n    boom: {}\n", nil)
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "kaboom") {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
}

func TestSecretsNeverPersisted(t *testing.T) {
	const secret = "tok-9f8e7d6c5b4a"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An echoing service: the secret comes back in the body.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"auth": r.Header.Get("Authorization"), "q": r.URL.RawQuery})
	}))
	defer echo.Close()
	h := newHarness(t, starflow.Config{Secrets: func(_ context.Context, name string) (string, error) {
		if name == "API_TOKEN" {
			return secret, nil
		}
		return "", errors.New("unknown secret")
	}})
	h.start()
	run := h.runToEnd(`
name: secretive
secrets: [API_TOKEN]
steps:
  - id: call
    service_call:
      url: "${{ input.url }}"
      headers: {Authorization: "${{ 'Bearer ' + secrets.API_TOKEN }}"}
      query: {t: "${{ secrets.API_TOKEN }}"}
  - id: keep
    context_set: {copied: "${{ steps.call.output.body.auth }}"}
  - id: boom
    fail: {message: "${{ 'token was ' + secrets.API_TOKEN }}"}
`, map[string]any{"url": echo.URL})
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "***") {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
	db := h.store.DB()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	for _, tb := range tables {
		r, err := db.Query(`SELECT * FROM "` + tb + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := r.Columns()
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			r.Scan(ptrs...)
			for i, v := range vals {
				var s string
				switch x := v.(type) {
				case string:
					s = x
				case []byte:
					s = string(x)
				}
				if strings.Contains(s, secret) || strings.Contains(s, "dG9rLTlmOGU3ZDZjNWI0YQ") {
					t.Errorf("secret found in %s.%s: %s", tb, cols[i], s)
				}
			}
		}
		r.Close()
	}
}

func TestLeaseLostStopsWriting(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	db := h.store.DB()
	stolen := make(chan struct{})
	h.eng.RegisterStep("steal", func(ctx context.Context, req *step.Request) (any, error) {
		// Another runner claims the run behind this one's back.
		if _, err := db.ExecContext(ctx, `UPDATE workflow_runs SET leased_by = 'thief', lease_epoch = lease_epoch + 1 WHERE id = ?`, req.RunID); err != nil {
			return nil, err
		}
		close(stolen)
		return "done", nil
	})
	h.start()
	d := h.apply("name: stolen\nsteps:\n  - id: a\n    steal: {}\n  - id: b\n    context_set: {x: 1}\n")
	run, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-stolen
	// The runner's completion of step a is refused (ErrLeaseLost) and it
	// abandons the run. Stop returns once its goroutine has ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := h.store.GetRun(context.Background(), &state.GetRunParams{ID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	steps := h.steps(run.ID)
	if len(steps) != 1 || steps[0].Status != starflowtype.StepRunning || r.LeasedBy != "thief" || r.Status != starflowtype.RunRunning {
		t.Fatalf("after lease loss: run %s/%s leased_by %s steps %+v", r.Status, r.ClaimState, r.LeasedBy, steps)
	}
	if n := len(h.checkpoints(run.ID)); n != 0 {
		t.Fatalf("%d checkpoints written under a stale lease", n)
	}
}

func TestGracefulStopReleasesLeaseAndAnotherRunnerContinues(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	block := make(chan struct{})
	recordStep(t, h, nil)
	entered := make(chan struct{}, 1)
	h.eng.RegisterStep("hold", func(ctx context.Context, req *step.Request) (any, error) {
		entered <- struct{}{}
		select {
		case <-block:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	if err := h.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// price is a double with an integral value: after the restore it must
	// still be a double, or the subtraction below has no overload.
	src := "name: graceful\nsteps:\n  - id: first\n    record: {label: a}\n" +
		"  - id: price\n    context_set: {price: \"${{ 980.0 }}\"}\n" +
		"  - id: wait\n    hold: {}\n  - id: last\n    record: {label: \"${{ string(variables.price - 0.5) }}\"}\n"
	d := h.apply(src)
	run, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // grace period
	defer cancel()
	if err := h.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := h.store.GetRun(context.Background(), &state.GetRunParams{ID: run.ID})
	if r.ClaimState != starflowtype.ClaimQueued || r.LeasedBy != "" {
		t.Fatalf("after stop: %s/%s leased_by %q", r.Status, r.ClaimState, r.LeasedBy)
	}
	// A second engine (another runner) on the same store continues the
	// same attempt; the checkpointed first step is restored, not re-run.
	eng2, err := starflow.New(starflow.Config{Store: h.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var n2 atomic.Int64
	eng2.RegisterStep("record", func(ctx context.Context, req *step.Request) (any, error) {
		n2.Add(1)
		return "ok", nil
	})
	eng2.RegisterStep("hold", func(ctx context.Context, req *step.Request) (any, error) { return "again", nil })
	eng2.Start(context.Background())
	defer eng2.Stop(context.Background())
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	final, err := eng2.WaitRun(wctx, run.ID)
	if err != nil || final.Status != starflowtype.RunSucceeded {
		t.Fatalf("final %v %v", final.Status, err)
	}
	if string(final.Output) != `"ok"` {
		t.Fatalf("output %s", final.Output)
	}
	if n2.Load() != 1 {
		t.Fatalf("second runner executed record %d times, want 1 (first was checkpointed)", n2.Load())
	}
	if final.LeaseEpoch != 2 || final.Attempt != 1 {
		t.Fatalf("epoch %d attempt %d", final.LeaseEpoch, final.Attempt)
	}
	close(block)
}

func TestShortSecretRefused(t *testing.T) {
	h := newHarness(t, starflow.Config{Secrets: func(context.Context, string) (string, error) { return "e", nil }})
	h.start()
	run := h.runToEnd("name: short\nsecrets: [TOK]\nsteps:\n  - id: a\n    context_set: {greeting: hello}\n", nil)
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "secret TOK is 1 bytes long") {
		t.Fatalf("run %s: %q", run.Status, run.Error)
	}
	if n := len(h.steps(run.ID)); n != 0 {
		t.Fatalf("%d steps ran with an unscrubbable secret", n)
	}
}

func TestUnencodableOutputFailsStep(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd("name: inf\nsteps:\n  - id: a\n    context_set: {x: \"${{ 1.0 / 0.0 }}\"}\n", nil)
	if run.Status != starflowtype.RunFailed || !strings.Contains(run.Error, "cannot be stored as JSON") {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
	if steps := h.steps(run.ID); len(steps) != 1 || steps[0].Status != starflowtype.StepFailed {
		t.Fatalf("ledger %+v", steps)
	}
}

// TestGracefulStopAtStepBoundary: during a graceful stop the step in flight
// finishes and is recorded, no further step starts, and the lease is
// released at once, well before the grace period ends.
func TestGracefulStopAtStepBoundary(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	n := recordStep(t, h, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	h.eng.RegisterStep("hold", func(ctx context.Context, _ *step.Request) (any, error) {
		close(entered)
		<-release
		return "done", nil
	})
	if err := h.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := h.apply("name: drain\nsteps:\n  - id: a\n    hold: {}\n  - id: b\n    record: {label: later}\n")
	run, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a long grace
		defer cancel()
		stopped <- h.eng.Stop(ctx)
	}()
	<-h.eng.Stopping()
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Stop waited for more than the step in flight")
	}
	r, _ := h.store.GetRun(context.Background(), &state.GetRunParams{ID: run.ID})
	steps := h.steps(run.ID)
	if r.ClaimState != starflowtype.ClaimQueued || r.LeasedBy != "" || n.Load() != 0 ||
		len(steps) != 1 || steps[0].Status != starflowtype.StepSucceeded || len(h.checkpoints(run.ID)) != 1 {
		t.Fatalf("after a graceful stop: %s/%s leased_by %q, b ran %d times, steps %+v", r.Status, r.ClaimState, r.LeasedBy, n.Load(), steps)
	}
}
