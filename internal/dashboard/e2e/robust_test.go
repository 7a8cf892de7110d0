package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestRunWithoutItsRevision: a run whose revision the store does not
// hold (never readable) still has a page: its head, ledger and waits,
// the graph said unreadable, and its approval form — stored with the
// wait — is drawn and approves it. A definition with a custom step type
// draws the type as the step's kind.
func TestRunWithoutItsRevision(t *testing.T) {
	e := newEnv(t)
	id := e.enqueue("expense", `{"amount": 7}`)
	e.waitStatus(id, starflowtype.RunPaused)
	db := e.store.(*sqlitestore.Store).DB()
	if _, err := db.ExecContext(context.Background(), `UPDATE workflow_runs SET workflow_revision = ? WHERE id = ?`, strings.Repeat("ab", 32), id); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	run(t, ctx, "open the run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`form[data-wait] button[type="submit"]`)))
	if s := text(t, ctx, `section[aria-label="Graph"]`); !strings.Contains(s, "not readable") {
		t.Errorf("graph of a run without its revision: %q, want it said unreadable", s)
	}
	if s := text(t, ctx, `form[data-wait] h3`); s != "Expense of 7" {
		t.Errorf("approval form title %q, want the stored form's", s)
	}
	if n := count(t, ctx, `#ledger tbody tr`); n != 2 {
		t.Errorf("ledger: %d rows, want 2", n)
	}
	run(t, ctx, "approve", chromedp.Click(css(`form[data-wait] input[type="radio"][value="true"]`)),
		chromedp.SendKeys(css(`form[data-wait] input[name="comment"]`), "ok"),
		chromedp.Click(css(`form[data-wait] button[type="submit"]`)), chromedp.WaitVisible(css(`main[data-status="succeeded"]`)))

	run(t, ctx, "a definition with a custom step", chromedp.Navigate(e.url+"/definitions/boom"), chromedp.WaitVisible(css(`main[data-ready="definition"]`)))
	if s := text(t, ctx, `.graph [data-key="|b"]`); !strings.Contains(s, "explode") {
		t.Errorf("the custom step's node says %q, want its type explode", s)
	}
}

// TestFailedRunOutput: a failed run's output panel says it has none
// because the run failed, rather than showing the error again as if it
// were the output.
func TestFailedRunOutput(t *testing.T) {
	e := newEnv(t)
	id := e.enqueue("boom", `{}`)
	e.waitStatus(id, starflowtype.RunFailed)
	ctx := browser(t)
	run(t, ctx, "open the failed run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
	out := eval[string](t, ctx, `[...document.querySelectorAll('section[aria-label="Input and output"] .panel')].find((p) => p.querySelector('h3').textContent === 'Output').textContent`)
	if strings.Contains(out, "exploded on purpose") || !strings.Contains(out, "failed") {
		t.Errorf("the failed run's output panel says %q, want that it has no output because it failed", out)
	}
	// The head shows the typed error: its message, and its type and the
	// step it arose at (issue 14).
	if msg := text(t, ctx, `main .panel dl.kv`); !strings.Contains(msg, "exploded on purpose") {
		t.Errorf("the run's head says %q, want the error message", msg)
	}
	if typ := text(t, ctx, `[data-error-type]`); typ != "error at step b" {
		t.Errorf("the error's type and origin read %q, want %q", typ, "error at step b")
	}
}
