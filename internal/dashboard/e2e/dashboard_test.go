package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestForEachInsideParallelGraph: the graph of a for_each inside each
// lane of a parallel shows every item, with its scope path and status,
// and run_after edges are drawn.
func TestForEachInsideParallelGraph(t *testing.T) {
	e := newEnv(t)
	id := e.enqueue("fan", `{}`)
	e.waitStatus(id, starflowtype.RunFailed)
	ctx := browser(t)
	run(t, ctx, "open the run", chromedp.Navigate(e.url+"/runs/"+id),
		chromedp.WaitVisible(css(`main[data-ready="run"]`)))
	for _, lane := range []string{"a", "b"} {
		for i := 0; i < 3; i++ {
			scope := fmt.Sprintf("fan.lane_%s/each_%s.item_%d", lane, lane, i)
			if n := count(t, ctx, fmt.Sprintf(`#graph [data-scope=%q]`, scope)); n != 1 {
				t.Errorf("graph: %d boxes for item scope %s, want 1", n, scope)
			}
		}
	}
	want := map[string]string{
		"fan.lane_a/each_a.item_0|work_a":  "succeeded",
		"fan.lane_a/each_a.item_2|work_a":  "succeeded",
		"fan.lane_b/each_b.item_0|work_b":  "succeeded",
		"fan.lane_b/each_b.item_1|check_b": "skipped",
		"fan.lane_b/each_b.item_2|work_b":  "skipped",
		"fan.lane_b/each_b.item_2|check_b": "failed",
		"|start":                           "succeeded",
		"|fan":                             "failed",
		"|audit":                           "succeeded",
	}
	for key, st := range want {
		got := eval[string](t, ctx, fmt.Sprintf(`(document.querySelector('#graph [data-key=%q]') || {dataset: {}}).dataset.status || 'absent'`, key))
		if got != st {
			t.Errorf("graph node %s: status %s, want %s", key, got, st)
		}
	}
	// run_after edges: start → fan, start → audit, fan → report.
	if n := count(t, ctx, `#graph svg.g-edges path`); n != 3 {
		t.Errorf("graph: %d run_after edges drawn, want 3", n)
	}
	if s := text(t, ctx, `main h1`); !strings.Contains(s, "fan") || !strings.Contains(s, "failed") {
		t.Errorf("run heading %q: want the workflow name and its status", s)
	}
	screenshot(t, ctx, "run-failed")
}

// TestListToDetail: the runs page lists runs with their status, filters
// by status, and a click opens the run's page.
func TestListToDetail(t *testing.T) {
	e := newEnv(t)
	held := e.enqueue("hold", `{}`)
	e.waitStatus(held, starflowtype.RunPaused)
	boom := e.enqueue("boom", `{}`)
	e.waitStatus(boom, starflowtype.RunFailed)
	ctx := browser(t)
	run(t, ctx, "open the runs page", chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
	if n := count(t, ctx, `tbody tr[data-run]`); n != 2 {
		t.Fatalf("runs page: %d rows, want 2", n)
	}
	row := text(t, ctx, fmt.Sprintf(`tr[data-run=%q]`, held))
	if !strings.Contains(row, "paused") || !strings.Contains(row, "waiting") {
		t.Errorf("row of the held run %q: want paused and a waiting badge", row)
	}
	if row := text(t, ctx, fmt.Sprintf(`tr[data-run=%q]`, boom)); !strings.Contains(row, "dead-lettered") {
		t.Errorf("row of the failed run %q: want a dead-lettered badge", row)
	}
	run(t, ctx, "filter by status", chromedp.SetValue(css(`select[name="status"]`), "failed"),
		chromedp.Click(css(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(css(`tr[data-run=%q]`, boom)))
	if n := count(t, ctx, `tbody tr[data-run]`); n != 1 {
		t.Errorf("status=failed: %d rows, want 1", n)
	}
	run(t, ctx, "open the run", chromedp.Click(css(`tr[data-run=%q] a`, boom)),
		chromedp.WaitVisible(css(`#ledger`)))
	if s := text(t, ctx, `#ledger`); !strings.Contains(s, "exploded on purpose") {
		t.Errorf("ledger %q: want the step's error", s)
	}
	// A run enqueued while the first page is open is announced, and shown
	// on request.
	run(t, ctx, "the first page", chromedp.Navigate(e.url+"/runs"), chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
	later := e.enqueue("hold", `{}`)
	run(t, ctx, "new runs announced", chromedp.WaitVisible(css(`#new-runs`)), chromedp.Click(css(`#new-runs`)),
		chromedp.WaitVisible(css(`tr[data-run=%q]`, later)))
	// Keyboard: Enter on the Filter button filters, even with a row selected.
	run(t, ctx, "Enter on Filter", chromedp.Navigate(e.url+"/runs"), chromedp.WaitVisible(css(`main[data-ready="runs"]`)),
		chromedp.KeyEvent("j"), chromedp.SetValue(css(`select[name="status"]`), "paused"),
		chromedp.Focus(css(`form.filters button[type="submit"]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
	if loc := eval[string](t, ctx, `location.pathname + location.search`); loc != "/runs?status=paused" {
		t.Errorf("Enter on Filter with a row selected went to %s, want /runs?status=paused", loc)
	}
	// Keyboard: back to the list, / focuses the search, j selects, Enter opens.
	run(t, ctx, "keyboard", chromedp.Navigate(e.url+"/runs"), chromedp.WaitVisible(css(`main[data-ready="runs"]`)),
		chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
}

// TestApproveThroughTheForm: a run parked on an approval renders the
// approval's form (its rendered title, labels, the required field); the
// form's submit signals the run, and the page shows it succeeded without
// a reload.
func TestApproveThroughTheForm(t *testing.T) {
	e := newEnv(t)
	operator := e.key(starflowtype.RoleOperator)
	id := e.enqueue("expense", `{"amount": 120}`)
	e.waitStatus(id, starflowtype.RunPaused)
	ctx := browser(t)
	signIn(t, ctx, e.url, operator)
	run(t, ctx, "open the waiting run", chromedp.Navigate(e.url+"/runs/"+id),
		chromedp.WaitVisible(css(`form[data-wait] input[data-field="approved"]`)))
	if s := text(t, ctx, `form[data-wait] h3`); s != "Expense of 120" {
		t.Errorf("approval form title %q, want the rendered %q", s, "Expense of 120")
	}
	if s := text(t, ctx, `form[data-wait]`); !strings.Contains(s, "Approve the expense") || !strings.Contains(s, "Comment") {
		t.Errorf("approval form %q: want the fields' labels", s)
	}
	if n := count(t, ctx, `form[data-wait] input[data-field="approved"][type="radio"][required]`); n != 2 {
		t.Errorf("approval form: %d required yes/no radios for the required boolean, want 2", n)
	}
	if n := count(t, ctx, `form[data-wait] input[name="comment"]`); n != 1 {
		t.Errorf("approval form: %d comment inputs, want 1", n)
	}
	if s := text(t, ctx, `#stuck`); !strings.Contains(s, "waiting") {
		t.Errorf("stuck reason %q: want a waiting reason", s)
	}
	screenshot(t, ctx, "run-waiting")
	// A marker in the page's window survives only if the page is not
	// reloaded.
	eval[bool](t, ctx, `window.__noReload = true`)
	run(t, ctx, "approve", chromedp.Click(css(`form[data-wait] input[data-field="approved"][value="true"]`)),
		chromedp.SendKeys(css(`form[data-wait] input[name="comment"]`), "fine by me"),
		chromedp.Click(css(`form[data-wait] button[type="submit"]`)),
		chromedp.WaitVisible(css(`main[data-status="succeeded"]`)))
	if !eval[bool](t, ctx, `window.__noReload === true`) {
		t.Error("the page was reloaded; it should have updated in place")
	}
	r := e.waitStatus(id, starflowtype.RunSucceeded)
	if got := string(r.Output); !strings.Contains(got, `"approved":true`) || !strings.Contains(got, `"comment":"fine by me"`) {
		t.Errorf("run output %s: want the form's payload", got)
	}
}

// TestViewerSeesNoActions: a viewer's page offers no action, and a post
// it forges anyway is refused: by its role, and, without the page's CSRF
// header, as forged. A form on another origin cannot post either.
func TestViewerSeesNoActions(t *testing.T) {
	e := newEnv(t)
	viewer := e.key(starflowtype.RoleViewer)
	held := e.enqueue("hold", `{}`)
	e.waitStatus(held, starflowtype.RunPaused)
	boom := e.enqueue("boom", `{}`)
	e.waitStatus(boom, starflowtype.RunFailed)
	ctx := browser(t)
	// A key the server does not know is refused, and the page says so.
	run(t, ctx, "a wrong key", chromedp.Navigate(e.url+"/runs"), chromedp.WaitVisible(css(`#key`)),
		chromedp.SendKeys(css(`#key`), "sf_"+strings.Repeat("A", 43)), chromedp.Submit(css(`#key`)),
		chromedp.WaitVisible(css(`.signin [role="alert"]`)))
	if s := text(t, ctx, `.signin [role="alert"]`); !strings.Contains(s, "does not know that key") {
		t.Errorf("sign-in with an unknown key says %q", s)
	}
	signIn(t, ctx, e.url, viewer, true)
	for _, id := range []string{held, boom} {
		run(t, ctx, "open a run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
		for _, label := range []string{"Cancel run", "Resume", "Retrigger", "Send signal"} {
			if n := eval[int](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('button')].filter(b => b.textContent.includes(%q)).length`, label)); n != 0 {
				t.Errorf("viewer, run %s: %d %q buttons, want none", id, n, label)
			}
		}
	}
	post := func(path string, withCSRF bool) int {
		js := fmt.Sprintf(`(async () => {
			const h = {'Content-Type': 'application/json'};
			const c = document.cookie.split('; ').find(x => x.startsWith('starflow_csrf='));
			if (%t && c) h['X-Starflow-CSRF'] = decodeURIComponent(c.split('=')[1]);
			const r = await fetch(%q, {method: 'POST', headers: h, body: '{}'});
			return r.status;
		})()`, withCSRF, path)
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := chromedp.Run(tctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := post("/api/runs/"+held+"/cancel", true); got != http.StatusForbidden {
		t.Errorf("viewer's forged cancel: %d, want 403", got)
	}
	if got := post("/api/runs/"+boom+"/resume", false); got != http.StatusForbidden {
		t.Errorf("cancel without the CSRF header: %d, want 403", got)
	}
	// A page of another origin posts a form to the API with the browser's
	// cookie.
	admin := e.key(starflowtype.RoleAdmin)
	signIn(t, ctx, e.url, admin, true)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/api/runs/%s/cancel" enctype="text/plain"><input name='{"a":"' value='"}'></form><script>document.getElementById('f').submit()</script>`, e.url, held)
	}))
	defer evil.Close()
	run(t, ctx, "visit the other site", chromedp.Navigate(evil.URL), chromedp.Sleep(500*time.Millisecond))
	r, err := e.store.GetRun(context.Background(), &state.GetRunParams{ID: held})
	if err != nil {
		t.Fatal(err)
	}
	if r.CancelRequested || r.Status != starflowtype.RunPaused {
		t.Errorf("a form on another origin cancelled the run: %s, cancel_requested %v", r.Status, r.CancelRequested)
	}
}

// TestDefinitionsAndDeadLetters: the definitions page lists the
// applied workflows, a definition's page draws its graph, shows its
// source and plans a new revision; the dead letters page lists a dead
// run and redrives it; the health page shows the store, the outbox and
// the runner alive.
func TestDefinitionsDeadLettersHealth(t *testing.T) {
	e := newEnv(t)
	boom := e.enqueue("boom", `{}`)
	e.waitStatus(boom, starflowtype.RunFailed)
	held := e.enqueue("hold", `{}`)
	e.waitStatus(held, starflowtype.RunPaused)
	ctx := browser(t)

	run(t, ctx, "definitions", chromedp.Navigate(e.url+"/definitions"), chromedp.WaitVisible(css(`main[data-ready="definitions"]`)))
	for _, name := range []string{"expense", "fan", "hold", "boom"} {
		if n := count(t, ctx, fmt.Sprintf(`a[href="/definitions/%s"]`, name)); n != 1 {
			t.Errorf("definitions page: %d links to %s, want 1", n, name)
		}
	}
	screenshot(t, ctx, "definitions")
	run(t, ctx, "a definition", chromedp.Click(css(`a[href="/definitions/fan"]`)), chromedp.WaitVisible(css(`main[data-ready="definition"]`)))
	if n := count(t, ctx, `.graph [data-key="|fan"]`); n != 1 {
		t.Errorf("definition page: the graph has %d fan nodes, want 1", n)
	}
	if s := text(t, ctx, `#source`); !strings.Contains(s, "name: fan") {
		t.Errorf("definition page: source %q, want the applied text", s)
	}
	// Plan a revision that drops the wait step of hold: the held run is
	// stranded.
	run(t, ctx, "plan", chromedp.Navigate(e.url+"/definitions/hold"), chromedp.WaitVisible(css(`main[data-ready="definition"]`)),
		chromedp.SendKeys(css(`textarea`), "name: hold\nsteps:\n  - id: other\n    context_set: {x: 1}\n"),
		chromedp.Click(css(`form.panel button[type="submit"]`)),
		chromedp.WaitVisible(css(`a[href="/runs/%s"]`, held)))
	screenshot(t, ctx, "definition")

	run(t, ctx, "dead letters", chromedp.Navigate(e.url+"/dead-letters"), chromedp.WaitVisible(css(`main[data-ready="dead-letters"]`)))
	if n := count(t, ctx, fmt.Sprintf(`tr[data-run=%q]`, boom)); n != 1 {
		t.Fatalf("dead letters page: %d rows of the dead run, want 1", n)
	}
	screenshot(t, ctx, "dead-letters")
	run(t, ctx, "redrive", chromedp.Click(css(`tr[data-run=%q] button`, boom)), chromedp.WaitNotPresent(css(`tr[data-run=%q]`, boom)))
	r, err := e.store.GetRun(context.Background(), &state.GetRunParams{ID: boom})
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempt < 2 { // it fails again at once (boom always does): a new attempt shows the redrive
		t.Errorf("redriven run is at attempt %d (%s), want a new attempt", r.Attempt, r.Status)
	}
	run(t, ctx, "health", chromedp.Navigate(e.url+"/health"), chromedp.WaitVisible(css(`main[data-ready="health"]`)))
	if s := text(t, ctx, `main`); !strings.Contains(s, "Cold store") || !strings.Contains(s, "Outbox") {
		t.Errorf("health page %q: want the store and the outbox", s)
	}
	if n := count(t, ctx, `#runners tbody tr`); n < 1 {
		t.Errorf("health page: %d runners alive, want the engine's", n)
	}
}

// TestLiveStepProgress: a step's progress report reaches the run's page
// over its live stream, and the run's end follows without a reload.
func TestLiveStepProgress(t *testing.T) {
	e := newEnv(t)
	id := e.enqueue("progress", `{}`)
	e.waitStatus(id, starflowtype.RunRunning)
	ctx := browser(t)
	run(t, ctx, "open the running run", chromedp.Navigate(e.url+"/runs/"+id),
		chromedp.WaitVisible(css(`#progress [data-step="crunch"]`)))
	if s := text(t, ctx, `#progress`); !strings.Contains(s, "50%") || !strings.Contains(s, "half way there") {
		t.Errorf("progress %q: want 50%% and the step's message", s)
	}
	e.release()
	run(t, ctx, "the run ends", chromedp.WaitVisible(css(`main[data-status="succeeded"]`)))
}
