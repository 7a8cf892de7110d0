package httpserver

import (
	"net/http"
	"strings"
	"testing"
)

// TestDashboardHeaders: the page answers at each of its paths with the
// CSP that forbids framing and inline script, X-Frame-Options DENY and
// nosniff; its script and stylesheet with their own types and nosniff;
// an unknown file under /ui/ is 404.
func TestDashboardHeaders(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	for _, path := range []string{"/", "/runs", "/runs/0123abcd", "/definitions", "/definitions/hold", "/dead-letters", "/health", "/sign-in"} {
		a := e.call("GET", path, "", nil)
		csp := a.header.Get("Content-Security-Policy")
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self';") ||
			a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, Content-Type %q, CSP %q, X-Frame-Options %q, nosniff %q", path, a.status,
				a.header.Get("Content-Type"), csp, a.header.Get("X-Frame-Options"), a.header.Get("X-Content-Type-Options"))
		}
	}
	for file, typ := range map[string]string{"app.js": "text/javascript", "app.css": "text/css"} {
		a := e.call("GET", "/ui/"+file, "", nil)
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), typ) || a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ui/%s: %d, Content-Type %q, nosniff %q; want %s", file, a.status, a.header.Get("Content-Type"), a.header.Get("X-Content-Type-Options"), typ)
		}
	}
	if a := e.call("GET", "/ui/index.html", "", nil); a.status != http.StatusNotFound {
		t.Errorf("GET /ui/index.html: %d, want 404", a.status)
	}
}

// TestAPIAnswersAreNotStored: every answer of the API to an
// authenticated caller (JSON, problem documents, by the bearer key or the
// sign-in cookie) says Cache-Control: no-store and nosniff, so neither the
// browser's cache nor a proxy keeps a run's input or output after the
// operator signed out.
func TestAPIAnswersAreNotStored(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	key := e.keys["alpha/viewer"]
	run := e.enqueue("alpha", "hold", map[string]any{})
	cookie, _ := e.session(key)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/me"}, {"GET", "/api/runs"}, {"GET", "/api/runs/" + run.ID}, {"GET", "/api/runs/" + run.ID + "/ledger"},
		{"GET", "/api/workflows/hold"}, {"GET", "/api/runs/00000000-0000-0000-0000-000000000000"}, {"GET", "/api/runs?limit=9999"},
		{"POST", "/api/runs/" + run.ID + "/cancel"}, // 403: a viewer
	} {
		for _, via := range []string{"bearer", "cookie"} {
			var a *apiAnswer
			if via == "bearer" {
				a = e.call(c.method, c.path, key, nil)
			} else {
				a = e.call(c.method, c.path, "", nil, "Cookie", cookie)
			}
			if a.header.Get("Cache-Control") != "no-store" || a.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s (%s): %d, Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff",
					c.method, c.path, via, a.status, a.header.Get("Cache-Control"), a.header.Get("X-Content-Type-Options"))
			}
		}
	}
}
