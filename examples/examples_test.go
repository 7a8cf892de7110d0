// Tests of the example workflows: every examples/*.yaml must parse, and
// each one is run end to end through the real engine (SQLite store,
// in-process runner) against the demo services served with httptest.
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/examples/services/demo"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/workflow"
)

// paymentToken is the secret the tests resolve PAYMENT_TOKEN to; it must
// never appear in anything the store persisted.
const paymentToken = "tok-s3cr3t-for-tests"

func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"quickstart.yaml": false, "order-saga.yaml": false, "data-pipeline.yaml": false, "ci-pipeline.yaml": false, "fanout.yaml": false}
	for _, f := range files {
		want[f] = true
		t.Run(f, func(t *testing.T) {
			def, err := workflow.ParseFile(f, workflow.ParseOptions{})
			if err != nil {
				t.Fatalf("%s does not validate:\n%v", f, err)
			}
			if def.Name == "" || len(def.Steps) == 0 {
				t.Fatalf("%s: parsed to an empty definition", f)
			}
		})
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("examples/%s is missing", f)
		}
	}
}

// TestFanout runs the control-flow example offline, with its defaults and
// with a zero-quantity line that the try/catch flags.
func TestFanout(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.run(t, "fanout.yaml", nil)
	h.wantStatus(t, run, starflowtype.RunSucceeded)
	out := outputOf(t, run)
	wantEq(t, "checked", out["checked"], true)
	wantEq(t, "settle_attempts", out["settle_attempts"], float64(2))
	lanes, _ := json.Marshal(out["lanes"])
	wantEq(t, "lanes", string(lanes), `{"bill":{"invoiced_lines":3},"pack":{"boxes":3}}`)
	bad := h.run(t, "fanout.yaml", map[string]any{"orders": []any{map[string]any{"sku": "a", "qty": 2}, map[string]any{"sku": "b", "qty": 0}}})
	h.wantStatus(t, bad, starflowtype.RunSucceeded)
	wantEq(t, "problem", outputOf(t, bad)["problem"], "an order line has quantity 0")
}

func TestQuickstart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	t.Run("defaults", func(t *testing.T) {
		run := h.run(t, "quickstart.yaml", nil)
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		out := outputOf(t, run)
		wantEq(t, "total", out["total"], 92.37)
		wantEq(t, "discount", out["discount"], "none")
		wantEq(t, "shipping", out["shipping"], "standard")
		wantEq(t, "item", out["item"], "3 × espresso-beans-1kg")
		wantEq(t, "phase", run.Phase, "quoted")
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"order": starflowtype.StepSucceeded, "reject_empty": starflowtype.StepSkipped,
			"volume_discount": starflowtype.StepSkipped, "total": starflowtype.StepSucceeded,
		})
	})

	t.Run("large order", func(t *testing.T) {
		run := h.run(t, "quickstart.yaml", map[string]any{
			"customer": "acme", "quantity": 40, "unit_price": 24.5, "country": "FR", "express": true,
		})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		out := outputOf(t, run)
		// 40 × 24.50 = 980.00, −10% = 882.00, +20% VAT 176.40, express 14.90.
		wantEq(t, "total", out["total"], 1073.3)
		wantEq(t, "discount", out["discount"], "10% volume discount")
		wantEq(t, "shipping", out["shipping"], "express")
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"reject_empty": starflowtype.StepSkipped, "volume_discount": starflowtype.StepSucceeded,
		})
	})

	t.Run("zero quantity fails", func(t *testing.T) {
		run := h.run(t, "quickstart.yaml", map[string]any{"quantity": 0})
		h.wantStatus(t, run, starflowtype.RunFailed)
		if !strings.Contains(run.Error, "quantity must be at least 1") {
			t.Errorf("error = %q, want the fail step's message", run.Error)
		}
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"reject_empty": starflowtype.StepFailed, "subtotal": starflowtype.StepSkipped,
		})
	})
}

func TestOrderSaga(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	t.Run("small order is confirmed", func(t *testing.T) {
		run := h.run(t, "order-saga.yaml", map[string]any{"sku": "widget", "qty": 2, "unit_price": 19.99, "base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		out := outputOf(t, run)
		res, _ := out["reservation_id"].(string)
		if status, ok := h.svc.Reservation(res); !ok || status != "committed" {
			t.Errorf("reservation %q is %q, want committed", res, status)
		}
		if id, _ := out["order_id"].(string); id == "" {
			t.Errorf("output has no order_id: %v", out)
		}
		wantEq(t, "amount", out["amount"], 39.98)
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"reserve": starflowtype.StepSucceeded, "charge": starflowtype.StepSucceeded,
			"compensate": starflowtype.StepSkipped, "release_stock": starflowtype.StepSkipped,
			"payment_declined": starflowtype.StepSkipped, "confirm": starflowtype.StepSucceeded,
		})
		h.wantNoSecret(t, run)
	})

	t.Run("declined payment releases the stock", func(t *testing.T) {
		before := h.svc.Stats()
		run := h.run(t, "order-saga.yaml", map[string]any{"sku": "gadget", "qty": 60, "unit_price": 19.99, "base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunFailed)
		if !strings.Contains(run.Error, "payment declined") || !strings.Contains(run.Error, "released") {
			t.Errorf("error = %q, want the payment_declined message", run.Error)
		}
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"charge": starflowtype.StepSucceeded, "compensate": starflowtype.StepSucceeded,
			"release_stock": starflowtype.StepSucceeded, "payment_declined": starflowtype.StepFailed,
			"confirm": starflowtype.StepSkipped, "done": starflowtype.StepSkipped,
		})
		after := h.svc.Stats()
		if after.Declines != before.Declines+1 || after.Released != before.Released+1 || after.ActiveReservations != before.ActiveReservations {
			t.Errorf("services: before %+v, after %+v: want one decline, one release, no reservation left behind", before, after)
		}
		if run.Phase != "compensating" {
			t.Errorf("phase = %q, want compensating", run.Phase)
		}
		h.wantNoSecret(t, run)
	})

	t.Run("input schema is enforced", func(t *testing.T) {
		_, err := h.eng.Enqueue(context.Background(), "order-saga", map[string]any{"sku": "widget", "qty": 0}, nil)
		if err == nil {
			t.Fatal("enqueue with qty 0 and no unit_price succeeded, want an input_schema error")
		}
	})
}

func TestDataPipeline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	t.Run("small batch after two 503s", func(t *testing.T) {
		run := h.run(t, "data-pipeline.yaml", map[string]any{"base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		steps := h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"extract": starflowtype.StepSucceeded, "enrich": starflowtype.StepSucceeded,
			"load_inline": starflowtype.StepSucceeded, "load_bulk": starflowtype.StepSkipped,
		})
		if tries := steps["extract"].Tries; tries != 3 {
			t.Errorf("extract tries = %d, want 3 (two 503s, then 200)", tries)
		}
		out := outputOf(t, run)
		wantEq(t, "loaded_via", out["loaded_via"], "inline")
		wantEq(t, "source_records", out["source_records"], 8.0)
		wantEq(t, "feed_failures_survived", out["feed_failures_survived"], 2.0)
		if load, _ := out["load"].(map[string]any); load == nil || load["loaded"] != 8.0 {
			t.Errorf("load = %v, want 8 rows loaded", out["load"])
		}
		if n := h.countEvents(t, run, starflowtype.EventNodeRetry); n != 2 {
			t.Errorf("%d node_retry events, want 2", n)
		}
	})

	t.Run("large batch loads in bulk", func(t *testing.T) {
		run := h.run(t, "data-pipeline.yaml", map[string]any{"base_url": h.url, "records": 45, "failures": 1})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		steps := h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"load_inline": starflowtype.StepSkipped, "load_bulk": starflowtype.StepSucceeded,
		})
		if tries := steps["extract"].Tries; tries != 2 {
			t.Errorf("extract tries = %d, want 2", tries)
		}
		out := outputOf(t, run)
		wantEq(t, "loaded_via", out["loaded_via"], "bulk")
		if load, _ := out["load"].(map[string]any); load == nil || load["loaded"] != 45.0 || load["batches"] != 5.0 {
			t.Errorf("load = %v, want 45 rows in 5 batches", out["load"])
		}
	})

	t.Run("more 503s than tries: a second attempt", func(t *testing.T) {
		// Six tries per attempt, seven 503s: attempt 1 fails, attempt 2
		// sends the same Idempotency-Key, gets the seventh 503 and then the
		// records.
		run := h.run(t, "data-pipeline.yaml", map[string]any{"base_url": h.url, "failures": 7})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		if run.Attempt != 2 {
			t.Errorf("attempt = %d, want 2", run.Attempt)
		}
		steps, err := h.store.ListSteps(context.Background(), &state.ListStepsParams{RunID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		tries := map[int]int{}
		for _, s := range steps {
			if s.StepID == "extract" {
				tries[s.Attempt] = s.Tries
			}
		}
		if tries[1] != 6 || tries[2] != 2 {
			t.Errorf("extract tries by attempt = %v, want 6 in attempt 1 and 2 in attempt 2", tries)
		}
		wantEq(t, "feed_failures_survived", outputOf(t, run)["feed_failures_survived"], 7.0)
	})

	t.Run("empty feed", func(t *testing.T) {
		run := h.run(t, "data-pipeline.yaml", map[string]any{"base_url": h.url, "records": 0, "failures": 0})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"enrich": starflowtype.StepSkipped, "transform": starflowtype.StepSkipped,
			"load_inline": starflowtype.StepSkipped, "load_bulk": starflowtype.StepSkipped,
			"finish": starflowtype.StepSucceeded,
		})
		wantEq(t, "loaded_via", outputOf(t, run)["loaded_via"], "nothing to load")
	})
}

func TestCIPipeline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	t.Run("main deploys", func(t *testing.T) {
		run := h.run(t, "ci-pipeline.yaml", map[string]any{"repo": "acme/shop", "branch": "main", "base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		steps := h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"build": starflowtype.StepSucceeded, "unit_tests": starflowtype.StepSucceeded,
			"integration_tests": starflowtype.StepSucceeded, "verdict": starflowtype.StepSucceeded,
			"deploy": starflowtype.StepSucceeded, "tests_failed": starflowtype.StepSkipped,
		})
		// run_after: the verdict starts only after both suites finished.
		v := steps["verdict"]
		for _, id := range []string{"unit_tests", "integration_tests"} {
			if v.StartedAt.Before(steps[id].FinishedAt) {
				t.Errorf("verdict started at %v, before %s finished at %v", v.StartedAt, id, steps[id].FinishedAt)
			}
		}
		out := outputOf(t, run)
		wantEq(t, "deployed", out["deployed"], true)
		wantEq(t, "tests_run", out["tests_run"], 251.0)
		if h.svc.Stats().Deploys != 1 {
			t.Errorf("deploys = %d, want 1", h.svc.Stats().Deploys)
		}
	})

	t.Run("feature branch does not deploy", func(t *testing.T) {
		run := h.run(t, "ci-pipeline.yaml", map[string]any{"repo": "acme/shop", "branch": "feature/search", "base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunSucceeded)
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"verdict": starflowtype.StepSucceeded, "deploy": starflowtype.StepSkipped,
		})
		wantEq(t, "deployed", outputOf(t, run)["deployed"], false)
	})

	t.Run("failing tests fail the run on main", func(t *testing.T) {
		run := h.run(t, "ci-pipeline.yaml", map[string]any{"repo": "acme/shop", "branch": "main", "fail_tests": true, "base_url": h.url})
		h.wantStatus(t, run, starflowtype.RunFailed)
		if !strings.Contains(run.Error, "2 test(s) failed on main") {
			t.Errorf("error = %q, want the tests_failed message", run.Error)
		}
		h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"deploy": starflowtype.StepSkipped, "tests_failed": starflowtype.StepFailed,
		})
	})

	if n := h.svc.Stats().Deploys; n != 1 {
		t.Errorf("%d deploys in all, want 1 (main with passing tests only)", n)
	}
}

// ---- harness ----

type harness struct {
	svc   *demo.Server
	url   string
	store *sqlitestore.Store
	eng   *starflow.Engine
}

// newHarness serves the demo services in-process and starts an engine on
// a fresh SQLite file.
func newHarness(t *testing.T) *harness {
	t.Helper()
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("engine and services log:\n%s", logs.String())
		}
	})
	svc := demo.New(demo.Config{CIDelay: 20 * time.Millisecond, Log: log.New(logs, "services: ", log.Lmicroseconds)})
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	ctx := context.Background()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{
		Store:       store,
		RunRetryMin: 50 * time.Millisecond, // the next attempt after a failed one starts soon
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Secrets: func(_ context.Context, name string) (string, error) {
			return paymentToken, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = eng.Stop(stop)
	})
	return &harness{svc: svc, url: srv.URL, store: store, eng: eng}
}

// run applies the example file, enqueues a run with input and waits for it.
func (h *harness) run(t *testing.T, file string, input any) *starflowtype.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	def, err := h.eng.Apply(ctx, file, src)
	if err != nil {
		t.Fatalf("apply %s: %v", file, err)
	}
	run, err := h.eng.Enqueue(ctx, def.Name, input, &starflow.EnqueueOptions{Revision: def.Revision})
	if err != nil {
		t.Fatalf("enqueue %s: %v", file, err)
	}
	final, err := h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("wait for run %s of %s: %v", run.ID, file, err)
	}
	return final
}

func (h *harness) wantStatus(t *testing.T, run *starflowtype.Run, want starflowtype.RunStatus) {
	t.Helper()
	if run.Status != want {
		t.Fatalf("run %s of %s: status %s (error %q), want %s\nledger:\n%s", run.ID, run.WorkflowName, run.Status, run.Error, want, h.ledger(t, run))
	}
}

// wantSteps checks the status of the named steps in the run's ledger and
// returns every step by id.
func (h *harness) wantSteps(t *testing.T, run *starflowtype.Run, want map[string]starflowtype.StepStatus) map[string]*starflowtype.Step {
	t.Helper()
	steps, err := h.store.ListSteps(context.Background(), &state.ListStepsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*starflowtype.Step{}
	for _, s := range steps {
		byID[s.StepID] = s
	}
	for id, st := range want {
		s, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("step %s: no ledger row, want %s", id, st)
		case s.Status != st:
			t.Errorf("step %s: %s (error %q), want %s", id, s.Status, s.Error, st)
		}
	}
	if t.Failed() {
		t.Logf("ledger of run %s:\n%s", run.ID, h.ledger(t, run))
	}
	return byID
}

func (h *harness) countEvents(t *testing.T, run *starflowtype.Run, typ starflowtype.EventType) int {
	t.Helper()
	evs, err := h.store.ListEvents(context.Background(), &state.ListEventsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// wantNoSecret checks that the payment token reached no persisted row of
// the run: the run itself, its ledger, events and checkpoints.
func (h *harness) wantNoSecret(t *testing.T, run *starflowtype.Run) {
	t.Helper()
	ctx := context.Background()
	steps, err := h.store.ListSteps(ctx, &state.ListStepsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := h.store.ListEvents(ctx, &state.ListEventsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := h.store.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{run, steps, evs, cps})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(paymentToken)) {
		t.Errorf("the PAYMENT_TOKEN value was persisted: %s", b)
	}
}

func (h *harness) ledger(t *testing.T, run *starflowtype.Run) string {
	steps, err := h.store.ListSteps(context.Background(), &state.ListStepsParams{RunID: run.ID})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "  %-18s %-9s tries=%d", s.StepID, s.Status, s.Tries)
		if s.Error != "" {
			b.WriteString("  " + s.Error)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func outputOf(t *testing.T, run *starflowtype.Run) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatalf("run %s: output %s is not a JSON object: %v", run.ID, run.Output, err)
	}
	return out
}

// wantEq compares a decoded JSON value (numbers are float64).
func wantEq(t *testing.T, what string, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
