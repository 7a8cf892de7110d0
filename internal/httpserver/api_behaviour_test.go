package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestEnqueueIdempotency: the first enqueue with a key is 201, a repeat
// 200 with the same run, concurrent repeats make one run, and the key
// with another input is 409 conflict.
func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	key := e.keys["alpha/operator"]
	body := map[string]any{"input": map[string]any{"n": 7}, "priority": 3}
	first := e.call("POST", "/run/quick/enqueue", key, body, "Idempotency-Key", "order-7")
	if first.status != http.StatusCreated {
		t.Fatalf("first enqueue: %d %s", first.status, shortBody(first.body))
	}
	var r1 starflowtype.Run
	first.decode(t, &r1)
	if r1.Priority != 3 || r1.WorkspaceID != "alpha" || r1.TriggerType != starflowtype.TriggerAPI {
		t.Errorf("run %+v: want priority 3, workspace alpha, trigger api", r1)
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.call("POST", "/run/quick/enqueue", key, body, "Idempotency-Key", "order-7")
			var r starflowtype.Run
			if a.status != http.StatusOK {
				t.Errorf("repeat: %d %s, want 200", a.status, shortBody(a.body))
				return
			}
			a.decode(t, &r)
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != "" && id != r1.ID {
			t.Errorf("a repeat returned run %s, want the first run %s", id, r1.ID)
		}
	}
	// The definition's defaults sent explicitly are the same request.
	same := map[string]any{"input": map[string]any{"n": 7}, "priority": 3, "recovery_mode": "replay", "max_attempts": 3, "delay": "0s", "pool": ""}
	if a := e.call("POST", "/run/quick/enqueue", key, same, "Idempotency-Key", "order-7"); a.status != http.StatusOK {
		t.Errorf("the same request with its defaults spelled out: %d %s, want 200", a.status, shortBody(a.body))
	}
	other := e.call("POST", "/run/quick/enqueue", key, map[string]any{"input": map[string]any{"n": 8}}, "Idempotency-Key", "order-7")
	var p api.Problem
	if other.status != http.StatusConflict {
		t.Fatalf("same key, other input: %d %s, want 409", other.status, shortBody(other.body))
	}
	other.decode(t, &p)
	if p.Code != api.CodeConflict {
		t.Errorf("problem code %q, want conflict", p.Code)
	}
	runs, err := e.store.ListRuns(context.Background(), &state.ListRunsParams{WorkflowName: "quick", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("%d runs of quick, want 1", len(runs))
	}
	// The same key in another workspace is another key.
	if a := e.call("POST", "/run/quick/enqueue", e.keys["beta/operator"], body, "Idempotency-Key", "order-7"); a.status != http.StatusCreated {
		t.Errorf("beta, same key: %d, want 201", a.status)
	}
}

// TestRunsPagingAndFilters walks GET /api/runs with a cursor while runs
// are inserted: every run is seen once; filters narrow; another
// workspace's runs never show.
func TestRunsPagingAndFilters(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	key := e.keys["alpha/viewer"]
	var want []string
	for range 12 {
		want = append(want, e.enqueue("alpha", "quick", map[string]any{}).ID)
	}
	e.enqueue("beta", "quick", map[string]any{})
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/api/runs?limit=5"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		a := e.call("GET", path, key, nil)
		var page api.RunList
		a.decode(t, &page)
		for _, r := range page.Runs {
			seen[r.ID]++
			if r.WorkspaceID != "alpha" {
				t.Errorf("alpha's listing shows run %s of %s", r.ID, r.WorkspaceID)
			}
		}
		e.enqueue("alpha", "quick", map[string]any{}) // newer: before the cursor, never on a later page
		if page.NextCursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("the listing never ended")
		}
		cursor = page.NextCursor
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("run %s seen %d times, want once", id, seen[id])
		}
	}
	// Filters: workflow and status.
	e.paused("alpha")
	a := e.call("GET", "/api/runs?workflow=hold&status=paused", key, nil)
	var page api.RunList
	a.decode(t, &page)
	if len(page.Runs) != 1 || page.Runs[0].WorkflowName != "hold" || page.Runs[0].Status != starflowtype.RunPaused {
		t.Errorf("workflow=hold&status=paused: %s", shortBody(a.body))
	}
	a = e.call("GET", "/api/runs?created_after="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), key, nil)
	a.decode(t, &page)
	if len(page.Runs) != 0 {
		t.Errorf("created_after an hour ahead: %d runs", len(page.Runs))
	}
}

// TestRunIDPrefixes: a unique prefix of 8 or more hex digits names a
// run; a prefix of another workspace's run is 404.
func TestRunIDPrefixes(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	r := e.ended("alpha")
	b := e.ended("beta")
	key := e.keys["alpha/viewer"]
	for _, p := range []string{r.ID[:8], strings.ToUpper(r.ID[:13]), r.ID} {
		a := e.call("GET", "/api/runs/"+p, key, nil)
		var got starflowtype.Run
		if a.status != 200 {
			t.Errorf("GET /api/runs/%s: %d %s", p, a.status, shortBody(a.body))
			continue
		}
		a.decode(t, &got)
		if got.ID != r.ID {
			t.Errorf("prefix %s found %s, want %s", p, got.ID, r.ID)
		}
	}
	if a := e.call("GET", "/api/runs/"+b.ID[:8], key, nil); a.status != http.StatusNotFound {
		t.Errorf("beta's run by prefix as alpha: %d, want 404", a.status)
	}
	if a := e.call("GET", "/api/runs/"+r.ID[:7], key, nil); a.status != 422 {
		t.Errorf("7-digit prefix: %d, want 422", a.status)
	}
}

// TestEnvLimitedKey: a key with an env sees only runs of that env.
func TestEnvLimitedKey(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	prod := e.ended("alpha") // the engine's env, prod
	staging := e.createKey("alpha", "staging", starflowtype.RoleOperator)
	if a := e.call("GET", "/api/runs/"+prod.ID, staging, nil); a.status != http.StatusNotFound {
		t.Errorf("a staging key reading a prod run: %d, want 404", a.status)
	}
	a := e.call("POST", "/run/quick/enqueue", staging, map[string]any{"input": map[string]any{}})
	var r starflowtype.Run
	a.decode(t, &r)
	if a.status != 201 || r.Env != "staging" {
		t.Fatalf("enqueue with a staging key: %d, env %q; want 201 and staging", a.status, r.Env)
	}
	a = e.call("GET", "/api/runs", staging, nil)
	var page api.RunList
	a.decode(t, &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != r.ID {
		t.Errorf("a staging key lists %s, want only its staging run", shortBody(a.body))
	}
}

// TestRevokedKeyIsRefusedAtOnce and a key made through the API works
// at once.
func TestKeysThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	admin := e.keys["alpha/admin"]
	a := e.call("POST", "/api/keys", admin, map[string]any{"name": "ci", "role": "operator"})
	var ck api.CreatedKey
	a.decode(t, &ck)
	if a.status != 201 || !strings.HasPrefix(ck.Secret, "sf_") || ck.Key.WorkspaceID != "alpha" || ck.Key.Role != starflowtype.RoleOperator {
		t.Fatalf("create key: %d %s", a.status, shortBody(a.body))
	}
	if strings.Contains(string(e.call("GET", "/api/keys", admin, nil).body), ck.Secret) {
		t.Error("the key listing shows a key's secret")
	}
	if a := e.call("GET", "/api/runs", ck.Secret, nil); a.status != 200 {
		t.Fatalf("the new key: %d", a.status)
	}
	if a := e.call("DELETE", "/api/keys/"+ck.Key.ID, admin, nil); a.status != 200 {
		t.Fatalf("revoke: %d %s", a.status, shortBody(a.body))
	}
	if a := e.call("GET", "/api/runs", ck.Secret, nil); a.status != http.StatusUnauthorized {
		t.Errorf("the revoked key: %d, want 401", a.status)
	}
	if a := e.call("DELETE", "/api/keys/"+ck.Key.ID, e.keys["beta/admin"], nil); a.status != http.StatusNotFound {
		t.Errorf("beta revoking alpha's key: %d, want 404", a.status)
	}
}

// TestNoKeysServesOpenly: without any key the loopback API answers
// without credentials (as admin of the engine's workspace), but a wrong
// credential is still refused.
func TestNoKeysServesOpenly(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, false, nil)
	a := e.call("POST", "/run/quick/enqueue", "", map[string]any{"input": map[string]any{}})
	if a.status != 201 {
		t.Fatalf("enqueue without keys: %d %s", a.status, shortBody(a.body))
	}
	if a := e.call("GET", "/api/runs", "sf_"+strings.Repeat("x", 43), nil); a.status != 401 {
		t.Errorf("an unknown key without keys configured: %d, want 401", a.status)
	}
	e.createKey("alpha", "", starflowtype.RoleViewer)
	if a := e.call("GET", "/api/runs", "", nil); a.status != 401 {
		t.Errorf("no key after one was created: %d, want 401", a.status)
	}
}

// TestLiveRunStream follows a run over SSE until it ends: events in id
// order with ids, a run message per change, the end; Last-Event-ID
// resumes after an event.
func TestLiveRunStream(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	r := e.paused("alpha")
	key := e.keys["alpha/operator"]
	req, _ := http.NewRequest("GET", e.url+"/api/live/runs/"+r.ID, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.call("POST", "/api/runs/"+r.ID+"/signal", key, map[string]any{"name": "go"})
	}()
	var types []string
	var lastStatus string
	var ids []string
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			if event == "" {
				ids = append(ids, strings.TrimPrefix(line, "id: "))
			}
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			if event == "run" {
				if i := strings.Index(data, `"status":"`); i >= 0 {
					lastStatus = strings.SplitN(data[i+10:], `"`, 2)[0]
				}
			} else {
				if i := strings.Index(data, `"event_type":"`); i >= 0 {
					types = append(types, strings.SplitN(data[i+14:], `"`, 2)[0])
				}
			}
			event = ""
		}
	}
	if lastStatus != "succeeded" {
		t.Errorf("the stream ended with run status %q, want succeeded", lastStatus)
	}
	joined := strings.Join(types, ",")
	for _, want := range []string{"run_queued", "run_paused", "wake_received", "run_succeeded"} {
		if !strings.Contains(joined, want) {
			t.Errorf("events %s: no %s", joined, want)
		}
	}
	// Resume after the paused event: the earlier ones are not sent again.
	a := e.call("GET", "/api/runs/"+r.ID+"/events", key, nil)
	var evs api.EventList
	a.decode(t, &evs)
	var pausedID int64
	for _, ev := range evs.Events {
		if ev.Type == starflowtype.EventRunPaused {
			pausedID = ev.ID
		}
	}
	body := e.call("GET", "/api/live/runs/"+r.ID, key, nil, "Last-Event-ID", strconv.FormatInt(pausedID, 10)).body
	if strings.Contains(string(body), `"run_queued"`) || !strings.Contains(string(body), `"run_succeeded"`) {
		t.Errorf("resumed after %d: %s", pausedID, shortBody(body))
	}
}

// TestEnqueueRateLimit: past the burst, enqueue is 429 with
// Retry-After; reads are not limited.
func TestEnqueueRateLimit(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, func(c *APIConfig) { c.Rate, c.Burst = 0.001, 3 })
	key := e.keys["alpha/operator"]
	for i := range 3 {
		if a := e.call("POST", "/run/quick/enqueue", key, map[string]any{"input": map[string]any{}}); a.status != 201 {
			t.Fatalf("enqueue %d: %d", i, a.status)
		}
	}
	a := e.call("POST", "/run/quick/enqueue", key, map[string]any{"input": map[string]any{}})
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("over the burst: %d (Retry-After %q), want 429 with Retry-After", a.status, a.header.Get("Retry-After"))
	}
	if a := e.call("POST", "/run/quick/enqueue", e.keys["alpha/admin"], map[string]any{"input": map[string]any{}}); a.status != 201 {
		t.Errorf("another key: %d, want 201 (the limit is per key)", a.status)
	}
	if a := e.call("GET", "/api/runs", key, nil); a.status != 200 {
		t.Errorf("a read over the enqueue limit: %d", a.status)
	}
}

// TestWrongMethodIs405: a method a route does not take is 405 with the
// methods it does take, behind the key check like the route itself.
func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/api/runs", "GET, HEAD"},
		{"POST", "/api/workflows/quick", "GET, HEAD, PUT"},
		{"GET", "/run/quick/enqueue", "POST"},
	} {
		a := e.call(c.method, c.path, e.keys["alpha/admin"], nil)
		if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", c.method, c.path, a.status, a.header.Get("Allow"), c.allow)
		}
		if a := e.call(c.method, c.path, "", nil); a.status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401", c.method, c.path, a.status)
		}
	}
}

// TestEnvLimitedKeysStayInTheirEnv: a key limited to an env cannot
// reach another env's run through an idempotency key or an id prefix,
// and what every env of the workspace shares (definitions to apply,
// session variables, correlation keys, other envs' keys) needs a key
// without an env.
func TestEnvLimitedKeysStayInTheirEnv(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	prodOp := e.keys["alpha/operator"] // no env: every env, enqueues into prod
	staging := e.createKey("alpha", "staging", starflowtype.RoleAdmin)
	body := map[string]any{"input": map[string]any{"n": 1}}
	if a := e.call("POST", "/run/quick/enqueue", prodOp, body, "Idempotency-Key", "order-1"); a.status != 201 {
		t.Fatalf("prod enqueue: %d", a.status)
	}
	a := e.call("POST", "/run/quick/enqueue", staging, body, "Idempotency-Key", "order-1")
	if a.status != http.StatusConflict || strings.Contains(string(a.body), `"env":"prod"`) {
		t.Errorf("staging reusing prod's idempotency key: %d %s, want 409 without the prod run", a.status, shortBody(a.body))
	}
	prod := e.ended("alpha")
	for _, prefix := range []string{prod.ID[:8], prod.ID[:1] + "-------"} {
		if a := e.call("GET", "/api/runs/"+prefix, staging, nil); a.status == 200 || strings.Contains(string(a.body), prod.ID) {
			t.Errorf("staging key, prefix %q of a prod run: %d %s", prefix, a.status, shortBody(a.body))
		}
	}
	if a := e.call("GET", "/live/runs/"+prod.ID, staging, nil); a.status != 404 {
		t.Errorf("staging key, JSON live view of a prod run: %d, want 404", a.status)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PUT", "/api/workflows/quick", quickWF},
		{"POST", "/api/workflows/quick/plan", quickWF},
		{"POST", "/api/signals", map[string]any{"name": "go", "correlation_key": "k"}},
		{"GET", "/api/sessions/s/vars", nil},
		{"PUT", "/api/sessions/s/vars/k", map[string]any{"value": 1}},
	} {
		if a := e.call(c.method, c.path, staging, c.body); a.status != http.StatusForbidden {
			t.Errorf("staging key: %s %s: %d, want 403", c.method, c.path, a.status)
		}
	}
	var keys api.KeyList
	e.call("GET", "/api/keys", staging, nil).decode(t, &keys)
	for _, k := range keys.Keys {
		if k.Env != "staging" {
			t.Errorf("a staging admin lists key %s of env %q", k.ID, k.Env)
		}
	}
	all, err := e.store.ListAPIKeys(context.Background(), &state.ListAPIKeysParams{WorkspaceID: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if k.Env == "" {
			if a := e.call("DELETE", "/api/keys/"+k.ID, staging, nil); a.status != http.StatusNotFound {
				t.Errorf("a staging admin revoking workspace key %s: %d, want 404", k.ID, a.status)
			}
		}
	}
}

// TestCrossSiteRequestsRefused: a browser's cross-site request that
// changes state is 403 even while no key exists; a wake is not.
func TestCrossSiteRequestsRefused(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, false, nil)
	for _, h := range [][]string{{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		if a := e.call("POST", "/run/quick/enqueue", "", []byte(`{"input": {}}`), h...); a.status != http.StatusForbidden {
			t.Errorf("enqueue with %s: %s: %d, want 403", h[0], h[1], a.status)
		}
	}
	if a := e.call("POST", "/run/quick/enqueue", "", map[string]any{"input": map[string]any{}}, "Sec-Fetch-Site", "same-origin"); a.status != 201 {
		t.Errorf("same-origin enqueue: %d, want 201", a.status)
	}
	if a := e.call("GET", "/api/runs", "", nil, "Sec-Fetch-Site", "cross-site"); a.status != 200 {
		t.Errorf("cross-site GET: %d, want 200 (reads change nothing)", a.status)
	}
	if a := e.call("POST", "/wake/not-a-token", "", nil, "Origin", "http://approvals.example"); a.status != http.StatusUnauthorized {
		t.Errorf("cross-site wake: %d, want 401 (the token decides)", a.status)
	}
}

// TestNulAndBadUTF8AreRefused: a NUL or bytes that are not UTF-8 in the
// path, query or headers are 400 before anything runs, and on
// PostgreSQL (which cannot store them) values in bodies are 400 too.
func TestNulAndBadUTF8AreRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var e *apiEnv
			if name == "sqlite" {
				e = newAPIEnv(t, true, nil)
			} else {
				e = newAPIEnvPG(t)
			}
			op := e.keys["alpha/admin"]
			for _, c := range []struct {
				method, path string
				body         any
				header       []string
			}{
				{"POST", "/run/qu%00ick/enqueue", map[string]any{"input": map[string]any{}}, nil},
				{"GET", "/api/workflows/%FF", nil, nil},
				{"GET", "/api/runs?workflow=a%00b", nil, nil},
				{"GET", "/api/sessions/s%00/vars/k", nil, nil},
				{"POST", "/run/quick/enqueue", map[string]any{"input": map[string]any{}}, []string{"Idempotency-Key", "a\xffb"}},
			} {
				if a := e.call(c.method, c.path, op, c.body, c.header...); a.status != 400 {
					t.Errorf("%s %s: %d %s, want 400", c.method, c.path, a.status, shortBody(a.body))
				}
			}
			for _, c := range []struct {
				body      string
				refusedPG bool // PostgreSQL cannot store it; SQLite can
			}{
				{`{"input": {}, "pool": "a\u0000b"}`, true},
				{`{"input": {}, "priority": 3000000000}`, true},
				{`{"input": {"x": "a\u0000b"}}`, false}, // JSON kept as text: the escape is six characters
			} {
				a := e.call("POST", "/run/quick/enqueue", op, []byte(c.body), "Content-Type", "application/json")
				if a.status >= 500 || (name == "postgres" && c.refusedPG && a.status < 400) {
					t.Errorf("enqueue %s: %d %s, want no 5xx (a 4xx on PostgreSQL)", c.body, a.status, shortBody(a.body))
				}
			}
			if a := e.call("PUT", "/api/sessions/s/vars/k", op, []byte(`{"value": "a\u0000"}`), "Content-Type", "application/json"); a.status >= 500 {
				t.Errorf("session value with a NUL: %d %s", a.status, shortBody(a.body))
			}
			if a := e.call("POST", "/api/keys", op, []byte(`{"name": "a\u0000", "role": "viewer"}`), "Content-Type", "application/json"); a.status >= 500 {
				t.Errorf("key name with a NUL: %d %s", a.status, shortBody(a.body))
			}
		})
	}
}

// TestStreamsEndWhenTheKeyIsRevoked and are bounded per key.
func TestStreamsEndWhenTheKeyIsRevoked(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	key := e.createKey("alpha", "", starflowtype.RoleViewer)
	r := e.paused("alpha") // never settles: the stream stays open
	req, _ := http.NewRequest("GET", e.url+"/api/live/runs/"+r.ID, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	k, err := e.store.APIKeyByHash(context.Background(), apikey.Hash(key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RevokeAPIKey(context.Background(), &state.RevokeAPIKeyParams{ID: k.ID}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(liveRecheck + 5*time.Second):
		t.Fatal("the stream of a revoked key is still open")
	}
}

// TestDefinitionErrorsCarryPositions: a definition that does not
// validate is 422 with each problem at body:LINE:COLUMN; one over the
// source cap is 413 naming the limit.
func TestDefinitionErrorsCarryPositions(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	a := e.call("PUT", "/api/workflows/quick", e.keys["alpha/admin"], "name: quick\nsteps:\n  - id: a\n    context_set: {x: \"${{ nope( }}\"}\n")
	var p api.Problem
	a.decode(t, &p)
	if a.status != 422 || len(p.Errors) == 0 || !strings.HasPrefix(p.Errors[0].Location, "body:4:") {
		t.Errorf("an invalid definition: %d %s, want 422 with errors at body:4:…", a.status, shortBody(a.body))
	}
	big := "name: quick\n# " + strings.Repeat("x", 1<<20) + "\nsteps: []\n"
	if a := e.call("PUT", "/api/workflows/quick", e.keys["alpha/admin"], big); a.status != 413 || !strings.Contains(string(a.body), "limits.definition_bytes") {
		t.Errorf("a source over the cap: %d %s, want 413 naming limits.definition_bytes", a.status, shortBody(a.body))
	}
}

// TestClientGoneIsNotAStoreFailure: a request whose client went away
// while its key was looked up (a page leaving a live stream) is not
// logged as a store that failed.
func TestClientGoneIsNotAStoreFailure(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var mu sync.Mutex
	e := newAPIEnv(t, false, nil)
	h, err := New(Config{Backend: e.eng, API: &APIConfig{Engine: e.eng, Rate: -1},
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	key := e.createKey("alpha", "", starflowtype.RoleViewer)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, auth := range []string{"", "Bearer " + key} {
		r := httptest.NewRequest("GET", "/api/runs", nil).WithContext(ctx)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logged.String(), "reading api_keys failed") {
		t.Errorf("a client that went away was logged as a store failure:\n%s", logged.String())
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
