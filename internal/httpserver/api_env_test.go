package httpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/warm/memory"
)

// The workflows every API test applies (in both workspaces).
const (
	// holdWF parks at a signal wait: a run that is paused, waiting.
	holdWF = `name: hold
steps:
  - id: first
    context_set: {seen: true}
  - id: gate
    wait: {signal: go, timeout: 1h}
  - id: last
    context_set: {done: true}
output: "${{ {'done': variables.done} }}"
`
	// quickWF ends at once.
	quickWF = `name: quick
input_schema:
  type: object
  properties:
    n: {type: integer}
steps:
  - id: a
    context_set: {x: "${{ has(input.n) ? input.n : 0 }}"}
output: "${{ {'x': variables.x} }}"
`
	// boomWF fails with no attempts left: a dead letter.
	boomWF = `name: boom
max_attempts: 1
steps:
  - id: a
    context_set: {x: 1}
  - id: b
    explode: {}
    retry_policy: {max_attempts: 1}
`
)

// apiEnv is a real engine (runner included) on a SQLite file behind the
// handler with its API, served by httptest.
type apiEnv struct {
	t     *testing.T
	url   string
	eng   *starflow.Engine
	store state.Adapter
	// keys["alpha/viewer"] is a viewer key of workspace alpha; also
	// operator, admin, and beta's.
	keys map[string]string
}

// newAPIEnv starts an environment; with keys it creates a key of every
// role in workspaces alpha and beta (alpha is the engine's default).
func newAPIEnv(t *testing.T, withKeys bool, mod func(*APIConfig)) *apiEnv {
	t.Helper()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "api.db"), Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return newAPIEnvOn(t, store, withKeys, mod)
}

// newAPIEnvPG is newAPIEnv on PostgreSQL, in a schema of its own.
func newAPIEnvPG(t *testing.T) *apiEnv {
	t.Helper()
	pgtest.Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_api_" + hex.EncodeToString(b[:])
	store, err := pgstore.Open(context.Background(), pgstore.Config{URL: pgtest.URL(), Schema: schema, Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = store.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		store.Close()
	})
	return newAPIEnvOn(t, store, true, nil)
}

// newAPIEnvOn is newAPIEnv on store.
func newAPIEnvOn(t *testing.T, store state.Adapter, withKeys bool, mod func(*APIConfig)) *apiEnv {
	t.Helper()
	var err error
	ctx := context.Background()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, Workspace: "alpha", AllWorkspaces: true, Warm: memory.New(),
		WakeKeys:     "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
		PollInterval: 20 * time.Millisecond, RunRetryMin: 10 * time.Millisecond, RunRetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.RegisterStep("explode", func(context.Context, *step.Request) (any, error) {
		return nil, errors.New("exploded on purpose")
	}); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"alpha", "beta"} {
		only := strings.Replace(quickWF, "name: quick", "name: only-"+ws, 1)
		for _, src := range []string{holdWF, quickWF, boomWF, only} {
			if _, err := eng.Apply(starflow.WithScope(ctx, starflow.Scope{Workspace: ws}), "wf.yaml", []byte(src)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Stop(sctx)
	})
	ac := &APIConfig{Engine: eng, Rate: -1}
	if mod != nil {
		mod(ac)
	}
	h, err := New(Config{Backend: eng, API: ac})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &apiEnv{t: t, url: srv.URL, eng: eng, store: store, keys: map[string]string{}}
	if withKeys {
		for _, ws := range []string{"alpha", "beta"} {
			for _, role := range []starflowtype.Role{starflowtype.RoleViewer, starflowtype.RoleOperator, starflowtype.RoleAdmin, starflowtype.RoleWorker} {
				e.keys[ws+"/"+string(role)] = e.createKey(ws, "", role)
			}
		}
	}
	return e
}

// createKey makes a key in the store and returns its text.
func (e *apiEnv) createKey(ws, env string, role starflowtype.Role) string {
	e.t.Helper()
	secret, hash := apikey.New()
	if _, err := e.store.CreateAPIKey(context.Background(), &state.CreateAPIKeyParams{
		WorkspaceID: ws, Env: env, Role: role, Name: ws + "-" + string(role), KeyHash: hash,
	}); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// apiAnswer is one HTTP apiAnswer.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a *apiAnswer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("apiAnswer %d %s: not the JSON expected: %v", a.status, a.body, err)
	}
}

// call sends one request with key ("" none); body is sent as is when a
// string or []byte, as JSON otherwise.
func (e *apiEnv) call(method, path, key string, body any, header ...string) *apiAnswer {
	e.t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd, ct = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	return &apiAnswer{status: resp.StatusCode, header: resp.Header, body: readAnswer(e.t, resp)}
}

// readAnswer reads a body; a stream that does not end by itself (the
// live runs stream) is read for 2 s.
func readAnswer(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		stop := time.AfterFunc(2*time.Second, func() { resp.Body.Close() })
		defer stop.Stop()
		raw, _ := io.ReadAll(resp.Body)
		return raw
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// enqueue starts a run of workflow in workspace ws through the engine.
func (e *apiEnv) enqueue(ws, workflow string, input any) *starflowtype.Run {
	e.t.Helper()
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: ws})
	r, err := e.eng.Enqueue(ctx, workflow, input, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// waitFor waits until run id satisfies ok (10 s at most).
func (e *apiEnv) waitFor(id string, what string, ok func(*starflowtype.Run) bool) *starflowtype.Run {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.store.GetRun(context.Background(), &state.GetRunParams{ID: id})
		if err != nil {
			e.t.Fatal(err)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s never became %s (status %s, claim %s)", id, what, r.Status, r.ClaimState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// paused is a run of hold, parked at its wait.
func (e *apiEnv) paused(ws string) *starflowtype.Run {
	r := e.enqueue(ws, "hold", map[string]any{})
	return e.waitFor(r.ID, "parked", func(r *starflowtype.Run) bool {
		// parked, not only paused: the run is paused (commit 1) before its
		// wait row is written (commit 3; internal/engine/waits.go).
		return r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked
	})
}

// ended is a run of quick that succeeded.
func (e *apiEnv) ended(ws string) *starflowtype.Run {
	r := e.enqueue(ws, "quick", map[string]any{"n": 1})
	return e.waitFor(r.ID, "succeeded", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunSucceeded })
}

// deadLetter is a run of boom, failed and dead-lettered.
func (e *apiEnv) deadLetter(ws string) *starflowtype.Run {
	r := e.enqueue(ws, "boom", map[string]any{})
	return e.waitFor(r.ID, "dead-lettered", func(r *starflowtype.Run) bool { return r.DeadLettered })
}

// cancelled is a run of hold, cancelled while paused.
func (e *apiEnv) cancelled(ws string) *starflowtype.Run {
	r := e.paused(ws)
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: ws})
	if _, err := e.eng.Cancel(ctx, r.ID); err != nil {
		e.t.Fatal(err)
	}
	return e.waitFor(r.ID, "cancelled", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunCancelled })
}

// endedWarm is a run of quick that succeeded, once the warm tier shows
// it so.
func (e *apiEnv) endedWarm(ws string) *starflowtype.Run {
	e.t.Helper()
	r := e.ended(ws)
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := e.eng.LiveRun(context.Background(), r.ID)
		if err == nil && w.Status == string(starflowtype.RunSucceeded) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s never reached the warm tier as succeeded (%v)", r.ID, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
