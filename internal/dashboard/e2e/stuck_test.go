package e2e

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/internal/stucktest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestStuckReasonsOnThePage: a run in each why-stuck state (the fixture
// TestStuckReasons checks in the engine, the API and the CLI) shows its
// reason and its sentence on its page and in its row of the runs page;
// the health page lists the runs the fixture's sweep recovered.
func TestStuckReasonsOnThePage(t *testing.T) {
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "stuck.db"), Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := stucktest.New(t, store, stucktest.Options{})
	h, err := httpserver.New(httpserver.Config{Backend: f.Engine, API: &httpserver.APIConfig{Engine: f.Engine, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := browser(t)
	run(t, ctx, "the runs page", chromedp.Navigate(srv.URL+"/runs"), chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
	for _, c := range f.Cases {
		got := eval[string](t, ctx, fmt.Sprintf(`(document.querySelector('tr[data-run=%q] td.why') || {dataset: {}}).dataset.reason || 'absent'`, c.RunID))
		if got != string(c.Reason) {
			t.Errorf("%s: the runs page's row says %s, want %s", c.Name, got, c.Reason)
		}
	}
	screenshot(t, ctx, "runs")
	for _, c := range f.Cases {
		run(t, ctx, "open "+c.Name, chromedp.Navigate(srv.URL+"/runs/"+c.RunID), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
		got := eval[string](t, ctx, `(document.querySelector('#stuck') || {dataset: {}}).dataset.reason || 'absent'`)
		if got != string(c.Reason) {
			t.Errorf("%s: the run page says %s, want %s", c.Name, got, c.Reason)
			continue
		}
		if s := text(t, ctx, `#stuck`); !strings.Contains(s, strings.ReplaceAll(string(c.Reason), "_", " ")) || len(s) < 40 {
			t.Errorf("%s: the run page's reason %q: want the reason and its sentence", c.Name, s)
		}
	}
	run(t, ctx, "health", chromedp.Navigate(srv.URL+"/health"), chromedp.WaitVisible(css(`main[data-ready="health"]`)))
	for _, name := range []string{"interrupted"} {
		c := f.Case(name)
		if n := count(t, ctx, fmt.Sprintf(`#recoveries a[href="/runs/%s"], #sweeps a[href="/runs/%s"]`, c.RunID, c.RunID)); n < 1 {
			t.Errorf("health page: the %s run the sweep recovered is not listed", name)
		}
	}
	screenshot(t, ctx, "health")
}
