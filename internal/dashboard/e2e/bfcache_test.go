package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
)

// back goes back in the tab's history (the browser may restore the page
// from its back/forward cache: no load event) and gives it time.
func back(t *testing.T, ctx context.Context) {
	t.Helper()
	// Scheduled, not called: a navigation started inside the evaluation
	// can close its context before the answer comes back (chromedp:
	// "Inspected target navigated or closed").
	eval[bool](t, ctx, `setTimeout(() => history.back(), 0), true`)
	time.Sleep(1500 * time.Millisecond)
}

// TestBackForwardCache: a page the browser restores from its
// back/forward cache is drawn again from the API: after a sign-out, Back
// shows the sign-in, not the run the signed-in page showed; and a run
// page restored after a visit elsewhere updates live again (leaving it
// closed its streams).
func TestBackForwardCache(t *testing.T) {
	e := newEnv(t)
	op := e.key(starflowtype.RoleOperator)
	id := e.enqueue("hold", `{}`)
	e.waitStatus(id, starflowtype.RunPaused)
	ctx := browser(t)
	signIn(t, ctx, e.url, op)
	run(t, ctx, "open the run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))

	elsewhere, _ := evilSite(t, `<p>another site</p>`)
	run(t, ctx, "visit another site", chromedp.Navigate(elsewhere))
	back(t, ctx)
	if _, err := e.eng.Signal(context.Background(), id, "go", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(id, starflowtype.RunSucceeded)
	// (chromedp's DOM waits do not follow a restored page: poll.)
	for deadline := time.Now().Add(10 * time.Second); eval[string](t, ctx, `document.querySelector('main').dataset.status || ''`) != "succeeded"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the page restored from the back/forward cache still shows %q after the run's end", eval[string](t, ctx, `document.querySelector('main').dataset.status || ''`))
		}
	}
	run(t, ctx, "reload", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`#who button`)))

	run(t, ctx, "sign out", chromedp.Click(css(`#who button`)), chromedp.WaitVisible(css(`#key`)))
	back(t, ctx)
	if s := eval[string](t, ctx, `document.querySelector('main').innerText`); strings.Contains(s, id) || !strings.Contains(s, "Sign in") {
		t.Errorf("Back after the sign-out shows %.200q, want the sign-in and nothing of the run", s)
	}
}
