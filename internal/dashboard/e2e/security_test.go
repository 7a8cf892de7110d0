package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// markup is what the tests write into every value a run carries: were
// any of it read as HTML, the page would hold an img, a script or an
// element with an inline handler of its own.
const markup = `<img src=x onerror="window.__xss=1"><script>window.__xss=1</script><a href="javascript:window.__xss=1">j</a>`

// injectWF carries the caller's text into its context, an approval's
// form (title, description, submit, fields, correlation key) and, after
// the approval, its failure.
const injectWF = `name: inject
max_attempts: 1
steps:
  - id: note
    context_set: {html: "${{ input.html }}"}
  - id: ask
    wait:
      correlation_key: "${{ input.html }}"
      approval:
        signal: ok
        form:
          title: "${{ input.html }}"
          description: "${{ input.html }}"
          submit: "${{ input.html }}"
          fields: "${{ input.fields }}"
      timeout: 1h
  - id: boom
    fail: {message: "${{ input.html + ' ' + steps.ask.output.pick }}"}
`

// apply applies a definition to the env's engine.
func (e *env) apply(src string) {
	e.t.Helper()
	if _, err := e.eng.Apply(context.Background(), "wf.yaml", []byte(src)); err != nil {
		e.t.Fatal(err)
	}
}

// noMarkup fails the test when the page in view holds an element the
// script never makes (img, iframe, object, a script in the body), an
// inline handler, a link that is not a path of this site, or when a
// script of the data ran.
func noMarkup(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	bad := eval[[]string](t, ctx, `(() => {
		const out = [];
		document.querySelectorAll('body img, body script, body iframe, body object, body embed').forEach((el) => out.push(el.outerHTML.slice(0, 80)));
		document.querySelectorAll('*').forEach((el) => { for (const a of el.attributes) if (/^on/i.test(a.name)) out.push(el.tagName + ' ' + a.name); });
		document.querySelectorAll('a[href]').forEach((a) => { const h = a.getAttribute('href'); if (!(h.startsWith('/') || h.startsWith('#')) || h.startsWith('//')) out.push('href ' + h); });
		if (window.__xss) out.push('window.__xss set');
		return out;
	})()`)
	if len(bad) > 0 {
		t.Errorf("%s: the data became markup: %q", where, bad)
	}
}

// TestDataNeverBecomesMarkup: a run whose input, context, approval form
// (title, description, button, field names, labels, help, choices),
// correlation key, signal payload, failure and events all hold HTML and
// a javascript: URL shows them as text on every page that shows them.
func TestDataNeverBecomesMarkup(t *testing.T) {
	e := newEnv(t)
	e.apply(injectWF)
	fields := map[string]any{
		markup: map[string]any{"type": "string", "label": markup, "description": markup},
		"pick": map[string]any{"enum": []any{markup, "javascript:window.__xss=1"}, "label": markup},
	}
	in, _ := json.Marshal(map[string]any{"html": markup, "fields": fields})
	id := e.enqueue("inject", string(in))
	e.waitStatus(id, starflowtype.RunPaused)
	ctx := browser(t)
	run(t, ctx, "the waiting run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`form[data-wait]`)))
	if s := text(t, ctx, `form[data-wait] h3`); s != markup {
		t.Errorf("approval title %q, want the text %q", s, markup)
	}
	noMarkup(t, ctx, "the waiting run")
	run(t, ctx, "approve", chromedp.SetValue(css(`form[data-wait] select`), `"javascript:window.__xss=1"`),
		chromedp.Click(css(`form[data-wait] button[type="submit"]`)), chromedp.WaitVisible(css(`main[data-status="failed"]`)))
	run(t, ctx, "the events", chromedp.Click(css(`section[aria-label="Events"] summary`)))
	if s := text(t, ctx, `main`); !strings.Contains(s, markup) {
		r, _ := e.store.GetRun(context.Background(), &state.GetRunParams{ID: id})
		t.Errorf("the failed run's page does not show the markup as text (run error %q)", r.Error)
	}
	noMarkup(t, ctx, "the failed run")
	for _, page := range []string{"/runs", "/dead-letters", "/definitions/inject", "/sign-in?error=" + markup} {
		run(t, ctx, "open "+page, chromedp.Navigate(e.url+page), chromedp.WaitVisible(css(`main .view > *:not(.muted)`)))
		noMarkup(t, ctx, page)
	}
}

// TestSignInShowsOnlyItsOwnMessages: the sign-in page says only what
// the server or the page itself said: a text put in its address
// (?error=, ?why=) by a link from elsewhere is not shown as the
// server's word.
func TestSignInShowsOnlyItsOwnMessages(t *testing.T) {
	e := newEnv(t)
	viewer := e.key(starflowtype.RoleViewer)
	ctx := browser(t)
	const lie = "Your key expired. Get a new one at https://starflow-keys.example and paste it here."
	for _, q := range []string{"error=" + lie, "why=" + lie, "error=unknown&why=" + lie} {
		run(t, ctx, "the sign-in page", chromedp.Navigate(e.url+"/sign-in?"+q), chromedp.WaitVisible(css(`#key`)))
		if s := text(t, ctx, `.signin`); strings.Contains(s, "starflow-keys.example") {
			t.Errorf("/sign-in?%s shows the address's text: %q", q, s)
		}
	}
	// Its own messages: the server's code, and the server's reason when a
	// signed-in page's key was revoked.
	run(t, ctx, "a known error code", chromedp.Navigate(e.url+"/sign-in?error=revoked"), chromedp.WaitVisible(css(`.signin [role="alert"]`)))
	if s := text(t, ctx, `.signin [role="alert"]`); !strings.Contains(s, "revoked") {
		t.Errorf("error=revoked says %q", s)
	}
	signIn(t, ctx, e.url, viewer, true)
	k, err := e.store.APIKeyByHash(context.Background(), apikey.Hash(viewer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RevokeAPIKey(context.Background(), &state.RevokeAPIKeyParams{ID: k.ID}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "a revoked key", chromedp.Navigate(e.url+"/runs?status=failed"), chromedp.WaitVisible(css(`.signin [role="alert"]`)))
	if s := text(t, ctx, `.signin [role="alert"]`); !strings.Contains(s, "revoked") {
		t.Errorf("the page of a revoked key's cookie says %q, want why", s)
	}
	if next := eval[string](t, ctx, `document.querySelector('input[name="next"]').value`); next != "/runs?status=failed" {
		t.Errorf("sign-in next %q, want the page asked for", next)
	}
}

// evilSite serves page (HTML) at http://localhost:PORT, another site
// than the dashboard's 127.0.0.1; same is the same page on 127.0.0.1 at
// another port (same site, another origin).
func evilSite(t *testing.T, page string) (cross, same string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), srv.URL
}

// TestOtherSitesChangeNothing: a page of another site, or of another
// origin on the same host, cannot drive the keyless loopback dev (form
// posts, fetch with mode no-cors, reading the runs), cannot sign the
// browser in with its own key (login CSRF) or out, and a signed-in
// page's script never reads the key's cookie.
func TestOtherSitesChangeNothing(t *testing.T) {
	e := newEnv(t)
	held := e.enqueue("hold", `{}`)
	e.waitStatus(held, starflowtype.RunPaused)
	ctx := browser(t)
	attack := fmt.Sprintf(`<script>
		const u = %q;
		(async () => {
			const tries = [
				fetch(u + '/run/hold/enqueue', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: '{"input": {}}'}),
				fetch(u + '/api/runs/%s/cancel', {method: 'POST', mode: 'no-cors'}),
				fetch(u + '/api/runs').then((r) => r.text()).then((t) => { window.__read = t; }),
			];
			await Promise.allSettled(tries);
			document.title = window.__read ? 'read' : 'done';
		})();
	</script>`, e.url, held)
	form := fmt.Sprintf(`<form id="f" method="post" action="%s/run/hold/enqueue" enctype="text/plain"><input name='{"input": {}, "x": "' value='"}'></form><script>document.getElementById('f').submit()</script>`, e.url)
	for _, origin := range []string{"cross", "same"} {
		attackCross, attackSame := evilSite(t, attack)
		formCross, formSame := evilSite(t, form)
		attackURL, formURL := attackCross, formCross
		if origin == "same" {
			attackURL, formURL = attackSame, formSame
		}
		run(t, ctx, origin+" fetches", chromedp.Navigate(attackURL))
		title := ""
		for deadline := time.Now().Add(10 * time.Second); title == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			title = eval[string](t, ctx, `document.title`)
		}
		if title != "done" {
			t.Errorf("a page of another %s origin: %q, want done (GET /api/runs of the keyless dev not readable)", origin, title)
		}
		run(t, ctx, origin+" form post", chromedp.Navigate(formURL), chromedp.Sleep(500*time.Millisecond))
	}
	runs, err := e.store.ListRuns(context.Background(), &state.ListRunsParams{WorkspaceID: "alpha", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("pages of other origins enqueued on the keyless dev: %d runs, want 1", len(runs))
	}
	if r := e.waitStatus(held, starflowtype.RunPaused); r.CancelRequested {
		t.Error("a page of another origin cancelled a run of the keyless dev")
	}

	// Keys exist: the operator signs in; another site posts the sign-in
	// form with its own key, and the sign-out form.
	admin := e.key(starflowtype.RoleAdmin)
	theirs := e.key(starflowtype.RoleViewer)
	signIn(t, ctx, e.url, admin)
	if c := eval[string](t, ctx, `document.cookie`); strings.Contains(c, "starflow_key") || strings.Contains(c, admin) {
		t.Errorf("the page's script reads the key: document.cookie = %q", c)
	}
	for _, action := range []string{
		fmt.Sprintf(`<form id="f" method="post" action="%s/ui/sign-in"><input name="key" value="%s"><input name="next" value="/runs"></form><script>document.getElementById('f').submit()</script>`, e.url, theirs),
		fmt.Sprintf(`<form id="f" method="post" action="%s/ui/sign-out"></form><script>document.getElementById('f').submit()</script>`, e.url),
	} {
		cross, same := evilSite(t, action)
		for _, u := range []string{cross, same} {
			run(t, ctx, "a forged sign-in or sign-out", chromedp.Navigate(u), chromedp.Sleep(500*time.Millisecond))
			run(t, ctx, "the dashboard", chromedp.Navigate(e.url+"/runs"), chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
			if who := text(t, ctx, `#who`); !strings.Contains(who, "e2e-admin") {
				t.Errorf("after a page of %s posted %s, the dashboard is signed in as %q, want e2e-admin", u, action[:60], who)
			}
		}
	}
}
