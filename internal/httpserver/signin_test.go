package httpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// signIn posts the sign-in form (fields as given) without following the
// redirect.
func (e *apiEnv) signIn(form url.Values) *http.Response {
	e.t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.url+"/ui/sign-in", form)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// session signs in with key and returns the Cookie header the browser
// would then send.
func (e *apiEnv) session(key string) (cookie, csrf string) {
	e.t.Helper()
	resp := e.signIn(url.Values{"key": {key}})
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign in: %d, want 303", resp.StatusCode)
	}
	var parts []string
	for _, c := range resp.Cookies() {
		parts = append(parts, c.Name+"="+c.Value)
		if c.Name == CSRFCookie {
			csrf = c.Value
		}
	}
	return strings.Join(parts, "; "), csrf
}

// revoke revokes the key whose text is key.
func (e *apiEnv) revoke(key string) {
	e.t.Helper()
	k, err := e.store.APIKeyByHash(context.Background(), apikey.Hash(key))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.RevokeAPIKey(context.Background(), &state.RevokeAPIKeyParams{ID: k.ID}); err != nil {
		e.t.Fatal(err)
	}
}

// TestSignInSetsCookies: a good key gets a 303 to next with the key
// cookie (HttpOnly) and the CSRF cookie (readable by the page), both
// SameSite=Strict, Path=/, 12 hours; the cookie then authenticates.
func TestSignInSetsCookies(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	key := e.keys["alpha/viewer"]
	resp := e.signIn(url.Values{"key": {key}, "next": {"/runs?status=failed"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs?status=failed" {
		t.Fatalf("sign in: %d to %q, want 303 to /runs?status=failed", resp.StatusCode, resp.Header.Get("Location"))
	}
	got := map[string]*http.Cookie{}
	for _, c := range resp.Cookies() {
		got[c.Name] = c
	}
	k, c := got[KeyCookie], got[CSRFCookie]
	if k == nil || c == nil {
		t.Fatalf("cookies %v: want %s and %s", resp.Header.Values("Set-Cookie"), KeyCookie, CSRFCookie)
	}
	if k.Value != key || !k.HttpOnly {
		t.Errorf("%s: value %q HttpOnly %v; want the key, HttpOnly", KeyCookie, k.Value, k.HttpOnly)
	}
	if c.HttpOnly || len(c.Value) != 43 || c.Value == key {
		t.Errorf("%s: %q HttpOnly %v; want 43 base64url characters a script can read", CSRFCookie, c.Value, c.HttpOnly)
	}
	for _, ck := range []*http.Cookie{k, c} {
		if ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge != 12*3600 || ck.Secure {
			t.Errorf("%s: SameSite %v Path %q Max-Age %d Secure %v; want Strict, /, 43200, not Secure over plain HTTP",
				ck.Name, ck.SameSite, ck.Path, ck.MaxAge, ck.Secure)
		}
	}
	cookie := KeyCookie + "=" + k.Value + "; " + CSRFCookie + "=" + c.Value
	a := e.call("GET", "/api/me", "", nil, "Cookie", cookie)
	var me api.Me
	a.decode(t, &me)
	if a.status != 200 || me.Auth != api.AuthKey || me.Via != "cookie" || me.Role != starflowtype.RoleViewer ||
		me.Workspace != "alpha" || me.KeyName != "alpha-viewer" || me.KeyID == "" {
		t.Errorf("GET /api/me with the cookie: %d %+v", a.status, me)
	}
	if me, err := client.New(e.url, key).Me(t.Context()); err != nil || me.Via != "bearer" || me.Role != starflowtype.RoleViewer {
		t.Errorf("client.Me with the bearer key: %+v, %v", me, err)
	}
	if a := e.call("GET", "/api/runs", "", nil, "Cookie", cookie); a.status != 200 {
		t.Errorf("GET /api/runs with the cookie: %d %s", a.status, shortBody(a.body))
	}
	// Signing out deletes both.
	out, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		Post(e.url+"/ui/sign-out", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	cleared := 0
	for _, ck := range out.Cookies() {
		if (ck.Name == KeyCookie || ck.Name == CSRFCookie) && ck.MaxAge < 0 && ck.Value == "" {
			cleared++
		}
	}
	if out.StatusCode != http.StatusSeeOther || out.Header.Get("Location") != "/sign-in" || cleared != 2 {
		t.Errorf("sign out: %d to %q, %v; want 303 to /sign-in clearing both cookies", out.StatusCode, out.Header.Get("Location"), out.Header.Values("Set-Cookie"))
	}
}

// TestSignInRefusals: a missing, malformed, unknown or revoked key is a
// 303 to /sign-in?error=CODE (with next), sets no cookie and never puts
// the key in the URL; next must be a path of this site.
func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, noSignInLimit)
	revoked := e.createKey("alpha", "", starflowtype.RoleAdmin)
	e.revoke(revoked)
	unknown, _ := apikey.New()
	for key, code := range map[string]string{
		"": "missing", "sf_short": "malformed", "not a key at all": "malformed", unknown: "unknown", revoked: "revoked",
	} {
		resp := e.signIn(url.Values{"key": {key}, "next": {"/runs/abc"}})
		loc := resp.Header.Get("Location")
		want := "/sign-in?error=" + code + "&next=%2Fruns%2Fabc"
		if resp.StatusCode != http.StatusSeeOther || loc != want {
			t.Errorf("key %q: %d to %q, want 303 to %q", key, resp.StatusCode, loc, want)
		}
		if len(resp.Cookies()) != 0 {
			t.Errorf("key %q: cookies %v set on a refusal", key, resp.Header.Values("Set-Cookie"))
		}
	}
	good := e.keys["alpha/operator"]
	for next, want := range map[string]string{
		"":                              "/",
		"/":                             "/",
		"/runs?status=failed":           "/runs?status=failed",
		"//evil.example/x":              "/",
		"/\\evil.example":               "/",
		"https://evil.example":          "/",
		"javascript:alert(1)":           "/",
		"runs":                          "/",
		"/a b":                          "/",
		"/a\r\nSet-Cookie: x":           "/",
		"/runs/\xff":                    "/",
		"/" + strings.Repeat("a", 3000): "/",
	} {
		resp := e.signIn(url.Values{"key": {good}, "next": {next}})
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != want {
			t.Errorf("next %q: %d to %q, want 303 to %q", next, resp.StatusCode, loc, want)
		}
	}
}

// TestSignInRateLimit: past the burst, attempts from one address are
// refused (error=rate_limited) without checking the key.
func TestSignInRateLimit(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, func(c *APIConfig) { c.SignInRate, c.SignInBurst = 0.01, 3 })
	var got []string
	for range 5 {
		got = append(got, e.signIn(url.Values{"key": {e.keys["alpha/viewer"]}}).Header.Get("Location"))
	}
	want := []string{"/", "/", "/", "/sign-in?error=rate_limited", "/sign-in?error=rate_limited"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("5 attempts at once with a burst of 3: redirected to %q, want %q", got, want)
	}
}

// noSignInLimit lifts the sign-in rate limit (tests that sign in often).
func noSignInLimit(c *APIConfig) { c.SignInRate = -1 }

// TestCookieCSRF: a request the sign-in cookie authenticates changes
// state only with the CSRF header equal to the CSRF cookie (403 "looks
// forged" otherwise, nothing written); the roles still apply; a bearer
// key needs no header; a bad cookie is 401; what a signed-in page
// enqueues is triggered by the dashboard.
func TestCookieCSRF(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, noSignInLimit)
	cookie, csrf := e.session(e.keys["alpha/operator"])
	body := map[string]any{"input": map[string]any{"n": 1}}
	for name, h := range map[string][]string{
		"no header":                  {"Cookie", cookie},
		"wrong header":               {"Cookie", cookie, CSRFHeader, strings.Repeat("x", 43)},
		"no csrf cookie, header set": {"Cookie", KeyCookie + "=" + e.keys["alpha/operator"], CSRFHeader, csrf},
	} {
		a := e.call("POST", "/run/quick/enqueue", "", body, h...)
		if a.status != http.StatusForbidden || !strings.Contains(string(a.body), "forged") {
			t.Errorf("%s: %d %s, want 403 saying it looks forged", name, a.status, shortBody(a.body))
		}
	}
	runs, err := e.store.ListRuns(t.Context(), &state.ListRunsParams{WorkspaceID: "alpha", WorkflowName: "quick"})
	if err != nil || len(runs) != 0 {
		t.Fatalf("refused enqueues wrote %d runs (%v)", len(runs), err)
	}
	a := e.call("POST", "/run/quick/enqueue", "", body, "Cookie", cookie, CSRFHeader, csrf)
	var r starflowtype.Run
	a.decode(t, &r)
	if a.status != http.StatusCreated || r.TriggerType != starflowtype.TriggerDashboard {
		t.Errorf("enqueue with the cookie and the header: %d, trigger %q; want 201, dashboard", a.status, r.TriggerType)
	}
	// A bearer key needs no CSRF header (a form cannot send one), and
	// wins over a cookie; its runs are triggered by the API.
	a = e.call("POST", "/run/quick/enqueue", e.keys["alpha/operator"], body, "Cookie", cookie)
	a.decode(t, &r)
	if a.status != http.StatusCreated || r.TriggerType != starflowtype.TriggerAPI {
		t.Errorf("enqueue with a bearer key: %d, trigger %q; want 201, api", a.status, r.TriggerType)
	}
	// Reads need no header.
	if a := e.call("GET", "/api/runs/"+r.ID, "", nil, "Cookie", cookie); a.status != 200 {
		t.Errorf("GET with the cookie, no header: %d", a.status)
	}
	// A viewer's cookie with a correct header: the role check refuses.
	vcookie, vcsrf := e.session(e.keys["alpha/viewer"])
	paused := e.paused("alpha")
	a = e.call("POST", "/api/runs/"+paused.ID+"/cancel", "", nil, "Cookie", vcookie, CSRFHeader, vcsrf)
	if a.status != http.StatusForbidden || !strings.Contains(string(a.body), "needs role operator") {
		t.Errorf("a viewer's cookie cancelling: %d %s, want 403 naming the role", a.status, shortBody(a.body))
	}
	// A cookie whose key is malformed, unknown or revoked is 401.
	unknown, _ := apikey.New()
	for _, v := range []string{"sf_nope", unknown} {
		if a := e.call("GET", "/api/runs", "", nil, "Cookie", KeyCookie+"="+v); a.status != http.StatusUnauthorized {
			t.Errorf("cookie key %q: %d, want 401", v, a.status)
		}
	}
	e.revoke(e.keys["alpha/viewer"])
	if a := e.call("GET", "/api/me", "", nil, "Cookie", vcookie); a.status != http.StatusUnauthorized || !strings.Contains(string(a.body), "revoked") {
		t.Errorf("a revoked key's cookie: %d %s, want 401 saying revoked", a.status, shortBody(a.body))
	}
}

// TestOpenCallerCSRF: without keys, a caller without cookies works as
// before (CLI, curl); a page that holds the CSRF cookie must send the
// header, and its enqueues are triggered by the dashboard. /api/me says
// open.
func TestOpenCallerCSRF(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, false, nil)
	a := e.call("GET", "/api/me", "", nil)
	var me api.Me
	a.decode(t, &me)
	if a.status != 200 || me.Auth != api.AuthOpen || me.Role != starflowtype.RoleAdmin || me.Workspace != "alpha" || me.Via != "" || me.KeyID != "" {
		t.Errorf("GET /api/me without keys: %d %+v, want open admin of alpha", a.status, me)
	}
	body := map[string]any{"input": map[string]any{}}
	if a := e.call("POST", "/run/quick/enqueue", "", body); a.status != http.StatusCreated {
		t.Errorf("enqueue without keys or cookies: %d", a.status)
	}
	token := strings.Repeat("t", 43)
	if a := e.call("POST", "/run/quick/enqueue", "", body, "Cookie", CSRFCookie+"="+token); a.status != http.StatusForbidden {
		t.Errorf("enqueue with the CSRF cookie and no header: %d, want 403", a.status)
	}
	a = e.call("POST", "/run/quick/enqueue", "", body, "Cookie", CSRFCookie+"="+token, CSRFHeader, token)
	var r starflowtype.Run
	a.decode(t, &r)
	if a.status != http.StatusCreated || r.TriggerType != starflowtype.TriggerDashboard {
		t.Errorf("enqueue with the CSRF cookie and header: %d, trigger %q; want 201, dashboard", a.status, r.TriggerType)
	}
}

// TestSessionCookiesSecureUnderTLS: over TLS both cookies are Secure.
func TestSessionCookiesSecureUnderTLS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		target, header, value string
		want                  bool
	}{
		{target: "https://127.0.0.1/ui/sign-in", want: true},
		{target: "http://127.0.0.1/ui/sign-in"},
		// Behind a TLS-terminating proxy the listener sees plain HTTP;
		// the proxy says the browser's scheme.
		{"http://127.0.0.1/ui/sign-in", "X-Forwarded-Proto", "https", true},
		{"http://127.0.0.1/ui/sign-in", "X-Forwarded-Proto", "HTTPS", true},
		{"http://127.0.0.1/ui/sign-in", "Forwarded", `for=192.0.2.1;proto=https;host=sf.example`, true},
		{"http://127.0.0.1/ui/sign-in", "X-Forwarded-Proto", "http", false},
		{"http://127.0.0.1/ui/sign-in", "Forwarded", "for=192.0.2.1", false},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", c.target, nil)
		if c.header != "" {
			r.Header.Set(c.header, c.value)
		}
		setSessionCookies(w, r, "k", "c", 60)
		res := w.Result()
		for _, ck := range res.Cookies() {
			if ck.Secure != c.want {
				t.Errorf("%s %s: %s: cookie %s Secure %v, want %v", c.target, c.header, c.value, ck.Name, ck.Secure, c.want)
			}
		}
		if len(res.Cookies()) != 2 {
			t.Errorf("%s: %d cookies, want 2", c.target, len(res.Cookies()))
		}
	}
}

// FuzzSafeNext: whatever the sign-in form's next holds, the redirect goes
// to a path of this site: next itself or /, never another host.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "/runs?x=1", "//evil", "/\\evil", "https://evil", "/%2F%2Fevil", "/\t/evil", "/.//evil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != "/" && got != next {
			t.Fatalf("safeNext(%q) = %q: neither it nor /", next, got)
		}
		u, err := url.Parse(got)
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.Contains(got, "\\") {
			t.Fatalf("safeNext(%q) = %q: not a path of this site", next, got)
		}
		// What the browser gets: http.Redirect's Location.
		w := httptest.NewRecorder()
		http.Redirect(w, httptest.NewRequest("POST", "/ui/sign-in", nil), got, http.StatusSeeOther)
		if loc := w.Header().Get("Location"); !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.Contains(loc, "\\") {
			t.Fatalf("safeNext(%q) = %q redirects to %q", next, got, loc)
		}
	})
}
