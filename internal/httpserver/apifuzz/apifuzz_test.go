package apifuzz

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/state/sqlitestore"
)

// The workflows the fuzzed API holds.
const (
	holdWF = `name: hold
steps:
  - id: gate
    wait: {signal: go, timeout: 1h}
`
	quickWF = `name: quick
input_schema:
  type: object
  properties:
    n: {type: integer}
steps:
  - id: a
    context_set: {x: 1}
`
)

// fuzzHandler is the API over a SQLite file, without a runner: the
// request decoders and handlers, nothing executing.
func fuzzHandler(f *testing.F) http.Handler {
	f.Helper()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(f.TempDir(), "fuzz.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		f.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, src := range []string{holdWF, quickWF} {
		if _, err := eng.Apply(context.Background(), "wf.yaml", []byte(src)); err != nil {
			f.Fatal(err)
		}
	}
	h, err := httpserver.New(httpserver.Config{Backend: eng, API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		f.Fatal(err)
	}
	return h
}

// checkAnswer fails on a 5xx, and on an error answer that is not a
// problem document.
func checkAnswer(t *testing.T, method, target string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s %s %q: %d %s", method, target, body, rec.Code, rec.Body.String())
	}
	if rec.Code >= 400 && strings.HasPrefix(target, "/api/") {
		var p api.Problem
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s %s: %d with Content-Type %q", method, target, rec.Code, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code {
			t.Fatalf("%s %s: %d with a body that is not its problem: %s", method, target, rec.Code, rec.Body.String())
		}
	}
}

// FuzzAPIRequests sends arbitrary methods, paths, queries, content types
// and bodies to every route family: never a 500, never a panic.
func FuzzAPIRequests(f *testing.F) {
	h := fuzzHandler(f)
	seeds := []struct{ method, target, ctype, body string }{
		{"POST", "/run/quick/enqueue", "application/json", `{"input": {"n": 1}, "priority": 2, "delay": "1s"}`},
		{"POST", "/run/quick/enqueue", "application/json", `{"input": [1], "max_attempts": -1}`},
		{"PUT", "/api/workflows/quick", "application/yaml", quickWF},
		{"POST", "/admin/validate", "application/json", `{"name": 1}`},
		{"POST", "/api/workflows/hold/plan", "application/yaml", holdWF},
		{"GET", "/api/runs?status=running,paused&limit=3&created_after=2026-01-01T00:00:00Z", "", ""},
		{"GET", "/api/runs?cursor=eyJ0IjoiMjAyNi0wMS0wMVQwMDowMDowMFoiLCJpIjoieCJ9", "", ""},
		{"GET", "/api/runs/00000000-0000-0000-0000-000000000000/ledger", "", ""},
		{"GET", "/api/runs/deadbeef/events?after=9", "", ""},
		{"POST", "/api/runs/deadbeefdead/resume", "application/json", `{"mode": "replay", "revision": "current"}`},
		{"POST", "/api/runs/deadbeef/signal", "application/json", `{"name": "go", "payload": {"a": 1e400}}`},
		{"POST", "/api/signals", "application/json", `{"name": "go", "correlation_key": "k", "payload": null}`},
		{"PUT", "/api/sessions/s/vars/k", "application/json", `{"value": {"x": [1, 2]}, "keep_for": "1h"}`},
		{"DELETE", "/api/sessions/s/vars/k", "", ""},
		{"POST", "/api/keys", "application/json", `{"name": "n", "role": "admin", "env": "e"}`},
		{"DELETE", "/api/keys/x", "", ""},
		{"POST", "/api/dead-letters/00000000-0000-0000-0000-000000000000/redrive", "", ""},
		{"POST", "/wake/abc", "application/json", `{}`},
		{"POST", "/api/workflows/quick/webhook", "", ""},
		{"GET", "/api/workflows/quick/webhook", "", ""},
		{"DELETE", "/api/workflows/hold/webhook", "", ""},
		{"POST", "/api/workflows/quick/trigger?workspace=default", "application/json", `{"n": 1}`},
		{"POST", "/api/workflows/nope/trigger?workspace=%00", "text/plain", "\x00"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.ctype, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://127.0.0.1"+target, strings.NewReader(string(body)))
		if err != nil {
			return // not a request a client can send
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, method, target, body, rec)
	})
}

// FuzzEnqueueBody sends arbitrary bodies to POST /run/quick/enqueue: a
// 201 creates a run, anything else is a 4xx problem.
func FuzzEnqueueBody(f *testing.F) {
	h := fuzzHandler(f)
	for _, s := range []string{`{"input": {}}`, `{"input": {"n": 3}, "revision": "abc"}`, `{"input": {}, "pool": "", "recovery_mode": "manual"}`,
		`{"input": {"n": 1.5}}`, `{"input": {"n": 9007199254740993}}`, `{"input": "\u0000"}`, `null`, `[]`, `{"input": {}, "delay": "-1s"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/run/quick/enqueue", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, "POST", "/api/enqueue", body, rec)
	})
}
