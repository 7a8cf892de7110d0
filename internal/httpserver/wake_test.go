package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/workflow"
)

// wakeBackend is a fake engine with one pending wait whose token is
// "good": the first wake consumes it; "other" names no wait; "forged"
// does not verify; "closed" is a wait that timed out; "boom" fails.
type wakeBackend struct {
	mu       sync.Mutex
	used     bool
	calls    int
	tokens   []string
	payloads []string
}

func (b *wakeBackend) wake(token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	b.tokens = append(b.tokens, token)
	b.payloads = append(b.payloads, string(payload))
	switch token {
	case "good":
		if b.used {
			return nil, fmt.Errorf("wake: wait w1 of run r1 is no longer pending: %w", starflowtype.ErrWaitClosed)
		}
		b.used = true
		return &starflowtype.Wait{ID: "w1", RunID: "r1", StepID: "ask", Status: starflowtype.WaitWoken, TokenHash: "secret-hash", Payload: payload}, nil
	case "other":
		return nil, fmt.Errorf("wake: no wait w9 of run r9 with this token: %w", starflowtype.ErrNotFound)
	case "closed":
		return nil, fmt.Errorf("wake: token expired: %w", starflowtype.ErrWaitClosed)
	case "boom":
		return nil, errors.New("database is locked at /srv/private/path.db")
	}
	return nil, fmt.Errorf("wake: malformed token: %w", starflowtype.ErrTokenInvalid)
}

type answer struct {
	code  int
	ctype string
	body  string
	allow string
}

func do(t *testing.T, srv *httptest.Server, method, path, ctype, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header.Get("Content-Type"), string(b), res.Header.Get("Allow")}
}

func wakeServer(t *testing.T) (*httptest.Server, *wakeBackend) {
	t.Helper()
	b := &wakeBackend{}
	h, err := New(Config{Backend: &fakeBackend{wakeFn: b.wake}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, b
}

// TestWakeStatuses: POST /wake/{token} answers 200 with the woken wait,
// then 410 for the same token; 401 for a forged token and for a token no
// wait has; 410 for a closed wait; 500 (without the internal error) for
// a backend failure. Every refusal is a problem document.
func TestWakeStatuses(t *testing.T) {
	srv, b := wakeServer(t)

	a := do(t, srv, "POST", "/wake/good", "application/json", ` {"approved": true} `)
	if a.code != 200 || a.ctype != "application/json" {
		t.Fatalf("first wake: %d %s %s", a.code, a.ctype, a.body)
	}
	var res WakeResult
	if err := json.Unmarshal([]byte(a.body), &res); err != nil {
		t.Fatal(err)
	}
	if res != (WakeResult{ID: "w1", RunID: "r1", StepID: "ask", Status: starflowtype.WaitWoken}) {
		t.Fatalf("wake result %+v", res)
	}
	if strings.Contains(a.body, "secret-hash") || strings.Contains(a.body, "approved") {
		t.Fatalf("the answer carries more than the wait's identity and status: %s", a.body)
	}
	if b.tokens[0] != "good" || b.payloads[0] != `{"approved": true}` {
		t.Fatalf("backend got token %q payload %q", b.tokens[0], b.payloads[0])
	}

	for _, tc := range []struct {
		name, token string
		code        int
		title       string
	}{
		{"used token", "good", 410, "wait closed"},
		{"closed wait", "closed", 410, "wait closed"},
		{"forged token", "forged", 401, "wake token invalid"},
		{"token of no wait", "other", 401, "wake token invalid"},
		{"backend failure", "boom", 500, "wake failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, srv, "POST", "/wake/"+tc.token, "application/json", `{}`)
			if a.code != tc.code || a.ctype != "application/problem+json" {
				t.Fatalf("POST /wake/%s: %d %s %s, want %d problem", tc.token, a.code, a.ctype, a.body, tc.code)
			}
			var p map[string]any
			if err := json.Unmarshal([]byte(a.body), &p); err != nil {
				t.Fatal(err)
			}
			if p["status"] != float64(tc.code) || p["title"] != tc.title || p["type"] != "about:blank" || p["detail"] == "" {
				t.Fatalf("problem %s", a.body)
			}
			if strings.Contains(a.body, "/srv/private") {
				t.Fatalf("a backend error leaks into the answer: %s", a.body)
			}
		})
	}
}

// TestWakeBody: an empty (or blank) body wakes with null; no Content-Type
// and +json types are accepted; a body that is not JSON, or holds a number
// with no finite value, is 400 and one over MaxWakeBody 413, neither
// reaching the backend (the token is not spent); a non-JSON Content-Type
// is 415.
func TestWakeBody(t *testing.T) {
	srv, b := wakeServer(t)
	if a := do(t, srv, "POST", "/wake/good", "", "  \n"); a.code != 200 {
		t.Fatalf("empty body: %d %s", a.code, a.body)
	}
	if b.payloads[0] != "" {
		t.Fatalf("empty body reached the backend as %q, want empty (null)", b.payloads[0])
	}
	if a := do(t, srv, "POST", "/wake/closed", "application/merge-patch+json; charset=utf-8", `[1,2]`); a.code != 410 {
		t.Fatalf("+json content type: %d %s", a.code, a.body)
	}
	calls := b.calls
	for _, tc := range []struct {
		name, ctype, body string
		code              int
	}{
		{"not JSON", "application/json", `{"approved": tru`, 400},
		{"two values", "application/json", `{} {}`, 400},
		{"stray brace", "application/json", `{}}`, 400},
		{"non-finite number", "application/json", `{"amount": 1e400}`, 400},
		{"negative non-finite number", "application/json", `[-1e400]`, 400},
		{"integer of 400 digits", "application/json", `1` + strings.Repeat("0", 400), 400},
		{"too large", "application/json", `"` + strings.Repeat("x", MaxWakeBody) + `"`, 413},
		{"form", "application/x-www-form-urlencoded", `approved=true`, 415},
		{"text", "text/plain", `{}`, 415},
		{"bad content type", "application/", `{}`, 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, srv, "POST", "/wake/good", tc.ctype, tc.body)
			if a.code != tc.code || a.ctype != "application/problem+json" {
				t.Fatalf("%d %s %s, want %d problem", a.code, a.ctype, a.body, tc.code)
			}
		})
	}
	if b.calls != calls {
		t.Fatalf("refused bodies reached the backend (%d calls, want %d)", b.calls, calls)
	}
}

// TestWakeNonFiniteDetail: the 400 for 1e400 says which number and where,
// and that the token is still usable; a backend that refuses the payload
// (ErrPayloadInvalid) is a 400 too.
func TestWakeNonFiniteDetail(t *testing.T) {
	srv, b := wakeServer(t)
	a := do(t, srv, "POST", "/wake/good", "application/json", `{"order": {"total": -1e400}}`)
	var p map[string]any
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.code != 400 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	detail, _ := p["detail"].(string)
	for _, frag := range []string{"-1e400", "$.order.total", "out of range", "token is still usable"} {
		if !strings.Contains(detail, frag) {
			t.Errorf("detail %q lacks %q", detail, frag)
		}
	}
	if b.calls != 0 {
		t.Fatal("the refused payload reached the backend")
	}
	if a := do(t, srv, "POST", "/wake/good", "application/json", `{"order": {"total": 1e300}}`); a.code != 200 {
		t.Fatalf("the same token with a valid payload: %d %s", a.code, a.body)
	}

	h, _ := New(Config{Backend: &fakeBackend{wakeFn: func(string, json.RawMessage) (*starflowtype.Wait, error) {
		return nil, fmt.Errorf("%w: no", starflowtype.ErrPayloadInvalid)
	}}})
	srv2 := httptest.NewServer(h)
	defer srv2.Close()
	if a := do(t, srv2, "POST", "/wake/x", "", `1`); a.code != 400 || !strings.Contains(a.body, "payload invalid") {
		t.Fatalf("backend ErrPayloadInvalid: %d %s", a.code, a.body)
	}
}

// TestWakeRoutes: POST under /wake/ with an empty or slashed token is a
// token answer (401), never 404; GET /wake/… is 405 with Allow: POST (a
// link opened or prefetched must not spend a token); the route list of
// a 404 names the wake route.
func TestWakeRoutes(t *testing.T) {
	srv, b := wakeServer(t)
	for _, path := range []string{"/wake/", "/wake/a/b"} {
		if a := do(t, srv, "POST", path, "", ""); a.code != 401 {
			t.Fatalf("POST %s: %d %s", path, a.code, a.body)
		}
	}
	if b.tokens[0] != "" || b.tokens[1] != "a/b" {
		t.Fatalf("tokens passed: %q", b.tokens)
	}
	calls := b.calls
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		a := do(t, srv, m, "/wake/good", "", "")
		if a.code != 405 || a.allow != "POST" || a.ctype != "application/problem+json" {
			t.Fatalf("%s /wake/good: %d allow %q %s", m, a.code, a.allow, a.body)
		}
	}
	if b.calls != calls {
		t.Fatal("a non-POST reached the backend")
	}
	if a := do(t, srv, "POST", "/waken", "", ""); a.code != 404 || !strings.Contains(a.body, "POST /wake/{token}") {
		t.Fatalf("POST /waken: %d %s", a.code, a.body)
	}
	// The read routes keep their answers.
	if a := do(t, srv, "POST", "/live/runners", "", ""); a.code != 405 || a.allow != "GET, HEAD" {
		t.Fatalf("POST /live/runners: %d %q", a.code, a.allow)
	}
	if a := do(t, srv, "GET", "/live/runs/", "", ""); a.code != 404 {
		t.Fatalf("GET /live/runs/: %d", a.code)
	}
}

// TestBindThenServe: Bind reports the chosen port before any handler
// exists; Serve serves it; a second Serve is refused; Shutdown of a
// listener that never served closes it.
func TestBindThenServe(t *testing.T) {
	s, err := Bind("127.0.0.1:0", ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr %s: the port is not chosen", addr)
	}
	h, _ := New(Config{Backend: &fakeBackend{wakeFn: (&wakeBackend{}).wake}})
	if err := s.Serve(h); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(h); err == nil {
		t.Fatal("second Serve: no error")
	}
	res, err := http.Post("http://"+addr+"/wake/good", "application/json", strings.NewReader(`1`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	idle, err := Bind("127.0.0.1:0", ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown without Serve: %v", err)
	}
	if err := idle.Serve(h); err == nil {
		t.Fatal("Serve after Shutdown: no error")
	}
	// The port is free again.
	again, err := Bind(idle.Addr(), ServerConfig{})
	if err != nil {
		t.Fatalf("rebinding a shut listener's port: %v", err)
	}
	_ = again.Shutdown(context.Background())
}

// TestWakeBodyLimit: Config.MaxWakeBody (the engine's payload cap) bounds
// what POST /wake/{token} reads: over it, 413 naming the cap and how to
// raise it, without reaching the backend; at it, the wake goes through.
// A backend refusing the payload as over its cap is 413 too.
func TestWakeBodyLimit(t *testing.T) {
	b := &wakeBackend{}
	h, err := New(Config{Backend: &fakeBackend{wakeFn: b.wake}, MaxWakeBody: 16})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if a := do(t, srv, "POST", "/wake/good", "application/json", `"`+strings.Repeat("x", 14)+`"`); a.code != 200 {
		t.Fatalf("at the cap: %d %s", a.code, a.body)
	}
	calls := b.calls
	a := do(t, srv, "POST", "/wake/good", "application/json", `"`+strings.Repeat("x", 15)+`"`)
	if a.code != 413 || !strings.Contains(a.body, "over the limit of 16 bytes (limits.payload_bytes; raise it with --max-payload-bytes") {
		t.Fatalf("over the cap: %d %s", a.code, a.body)
	}
	if b.calls != calls {
		t.Fatal("a body over the cap reached the backend")
	}

	over := &fakeBackend{wakeFn: func(string, json.RawMessage) (*starflowtype.Wait, error) {
		return nil, fmt.Errorf("wake: %w", workflow.Limits{PayloadBytes: 2}.CheckPayload(3))
	}}
	h, err = New(Config{Backend: over})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(h)
	t.Cleanup(srv2.Close)
	if a := do(t, srv2, "POST", "/wake/good", "application/json", `123`); a.code != 413 || !strings.Contains(a.body, "limits.payload_bytes") {
		t.Fatalf("backend over its cap: %d %s", a.code, a.body)
	}
}
