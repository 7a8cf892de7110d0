package httpserver

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/webhook"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// enableWebhook enables workflow's webhook as ws's admin over the API.
func (e *apiEnv) enableWebhook(ws, workflow string) *api.Webhook {
	e.t.Helper()
	a := e.call("POST", "/api/workflows/"+workflow+"/webhook", e.keys[ws+"/admin"], nil)
	if a.status != http.StatusOK {
		e.t.Fatalf("enable webhook of %s/%s: %d %s", ws, workflow, a.status, a.body)
	}
	var w api.Webhook
	a.decode(e.t, &w)
	return &w
}

// deliver posts body to a webhook URL (as enable answered it, or a
// path) signed with secret ("" signs nothing) under header, with more
// headers after.
func (e *apiEnv) deliver(url, secret, header string, body []byte, more ...string) *apiAnswer {
	e.t.Helper()
	path := strings.TrimPrefix(url, e.url)
	h := append([]string{"Content-Type", "application/json"}, more...)
	if secret != "" {
		h = append(h, header, webhook.Sign(secret, body))
	}
	return e.call("POST", path, "", body, h...)
}

// rowCounts counts the rows of every table a delivery could write.
func (e *apiEnv) rowCounts() map[string]int {
	e.t.Helper()
	db := e.store.(interface{ DB() *sql.DB }).DB()
	out := map[string]int{}
	for _, table := range []string{"workflow_runs", "workflow_run_events", "idempotency_receipts", "workflow_webhooks", "mirror_outbox"} {
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			e.t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// TestWebhookTriggerStartsRun: a delivery signed with the secret enable
// answered is 202 with a new run of the workflow whose input is the body
// (trigger_type api, run_queued marking the delivery), and the run runs.
func TestWebhookTriggerStartsRun(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	w := e.enableWebhook("alpha", "quick")
	if w.Generation != 1 || w.Header != api.WebhookSignatureHeader || !strings.HasPrefix(w.Secret, webhook.SecretPrefix) || !w.Enabled {
		t.Fatalf("enable answered %+v; want generation 1, header %s, an sfwh_ secret, enabled", w, api.WebhookSignatureHeader)
	}
	if want := e.url + "/api/workflows/quick/trigger?workspace=alpha"; w.URL != want {
		t.Fatalf("url %q, want %q", w.URL, want)
	}
	for i, header := range []string{api.WebhookSignatureHeader, api.GitHubSignatureHeader} {
		body := fmt.Appendf(nil, `{"n": %d}`, 40+i)
		a := e.deliver(w.URL, w.Secret, header, body)
		if a.status != http.StatusAccepted {
			t.Fatalf("signed in %s: %d %s, want 202", header, a.status, a.body)
		}
		var tr api.WebhookTriggered
		a.decode(t, &tr)
		if !tr.Created || tr.Workflow != "quick" || tr.Status != starflowtype.RunQueued {
			t.Fatalf("answer %+v: want a created, queued run of quick", tr)
		}
		if cc := a.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		r := e.waitFor(tr.RunID, "succeeded", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunSucceeded })
		if string(r.Input) != string(body) || r.TriggerType != starflowtype.TriggerAPI || r.WorkspaceID != "alpha" || r.Env != state.DefaultEnv {
			t.Errorf("run: input %s, trigger %s, workspace %s, env %s; want the body, api, alpha, %s", r.Input, r.TriggerType, r.WorkspaceID, r.Env, state.DefaultEnv)
		}
		var out struct{ X int }
		if err := json.Unmarshal(r.Output, &out); err != nil || out.X != 40+i {
			t.Errorf("output %s, want x = %d from the body", r.Output, 40+i)
		}
		evs, err := e.store.ListEvents(t.Context(), &state.ListEventsParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if evs[0].Type != starflowtype.EventRunQueued || !strings.Contains(string(evs[0].Payload), `"webhook"`) || !strings.Contains(string(evs[0].Payload), `"generation"`) {
			t.Errorf("first event %s %s: want run_queued marking a webhook delivery", evs[0].Type, evs[0].Payload)
		}
	}
}

// TestWebhookBadSignatureIsUnauthorizedAndCreatesNothing is the
// acceptance: every delivery that does not prove the workflow's current
// secret — none, wrong, malformed, another body's, an earlier
// generation's, another workspace's, a disabled or never enabled
// webhook's, an unknown workflow's — is the same 401 problem, and no row
// of any table changes.
func TestWebhookBadSignatureIsUnauthorizedAndCreatesNothing(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	old := e.enableWebhook("alpha", "quick")
	cur := e.enableWebhook("alpha", "quick") // a rotation
	beta := e.enableWebhook("beta", "quick")
	off := e.enableWebhook("alpha", "hold")
	if a := e.call("DELETE", "/api/workflows/hold/webhook", e.keys["alpha/admin"], nil); a.status != http.StatusOK {
		t.Fatalf("disable: %d %s", a.status, a.body)
	}
	body := []byte(`{"n": 1}`)
	quick := "/api/workflows/quick/trigger?workspace=alpha"
	cases := []struct {
		what, path, secret, header string
		body                       []byte
		more                       []string
	}{
		{"no signature", quick, "", "", body, nil},
		{"a wrong secret", quick, "sfwh_" + strings.Repeat("0", 64), api.WebhookSignatureHeader, body, nil},
		{"the previous generation's secret", quick, old.Secret, api.WebhookSignatureHeader, body, nil},
		{"the previous generation's secret, GitHub's header", quick, old.Secret, api.GitHubSignatureHeader, body, nil},
		{"another workspace's secret", quick, beta.Secret, api.WebhookSignatureHeader, body, nil},
		{"the secret of another workflow", quick, off.Secret, api.WebhookSignatureHeader, body, nil},
		{"a disabled webhook", "/api/workflows/hold/trigger?workspace=alpha", off.Secret, api.WebhookSignatureHeader, body, nil},
		{"a workflow without a webhook", "/api/workflows/boom/trigger?workspace=alpha", cur.Secret, api.WebhookSignatureHeader, body, nil},
		{"an unknown workflow", "/api/workflows/nope/trigger?workspace=alpha", cur.Secret, api.WebhookSignatureHeader, body, nil},
		{"an unknown workspace", "/api/workflows/quick/trigger?workspace=gamma", cur.Secret, api.WebhookSignatureHeader, body, nil},
		{"no workspace (the server's, alpha) but beta's secret", "/api/workflows/quick/trigger", beta.Secret, api.WebhookSignatureHeader, body, nil},
		{"a malformed signature", quick, "", "", body, []string{api.WebhookSignatureHeader, "sha256=zz"}},
		{"a signature without sha256=", quick, "", "", body, []string{api.WebhookSignatureHeader, strings.TrimPrefix(webhook.Sign(cur.Secret, body), "sha256=")}},
		{"another body's signature", quick, "", "", body, []string{api.WebhookSignatureHeader, webhook.Sign(cur.Secret, []byte(`{"n": 2}`))}},
		{"a good GitHub signature under a wrong Starflow one", quick, "", "", body,
			[]string{api.WebhookSignatureHeader, webhook.Sign(old.Secret, body), api.GitHubSignatureHeader, webhook.Sign(cur.Secret, body)}},
		{"an invalid input, unsigned", quick, "", "", []byte(`{"n": "one"}`), nil},
		{"not JSON, unsigned", quick, "", "", []byte(`n=1`), []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"a delivery id, unsigned", quick, "", "", body, []string{api.WebhookDeliveryHeader, "d-1"}},
		{"with an API key but no signature", quick, "", "", body, []string{"Authorization", "Bearer " + e.keys["alpha/admin"]}},
	}
	before := e.rowCounts()
	var first string
	for _, c := range cases {
		a := e.deliver(c.path, c.secret, c.header, c.body, c.more...)
		if a.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", c.what, a.status, a.body)
			continue
		}
		if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want a problem document", c.what, ct)
		}
		// One answer for every case: nothing says which workflows exist
		// or take webhooks.
		if first == "" {
			first = string(a.body)
		} else if string(a.body) != first {
			t.Errorf("%s: answered %s, unlike the first case's %s", c.what, a.body, first)
		}
	}
	if after := e.rowCounts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused deliveries changed the tables: %v before, %v after", before, after)
	}
	// The current secret works, on the same URL: the refusals were not
	// something else.
	if a := e.deliver(quick, cur.Secret, api.WebhookSignatureHeader, body); a.status != http.StatusAccepted {
		t.Fatalf("the current secret: %d %s, want 202", a.status, a.body)
	}
}

// TestWebhookBodyCheckedAfterSignature: a signed body that cannot start
// a run is 422 (not an object, refused by input_schema, not JSON), 415
// (a type that is not JSON) or 413 (over the input cap), and creates
// nothing.
func TestWebhookBodyCheckedAfterSignature(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	w := e.enableWebhook("alpha", "quick")
	before := e.rowCounts()
	for _, c := range []struct {
		what    string
		body    string
		more    []string
		status  int
		mention string
	}{
		{"an array", `[1]`, nil, 422, "object"},
		{"a string", `"text"`, nil, 422, "object"},
		{"not JSON", `{"n": `, nil, 422, "json"},
		{"empty", ``, nil, 422, "json"},
		{"refused by input_schema", `{"n": "one"}`, nil, 422, "n"},
		{"a number with no finite value", `{"n": 1e400}`, nil, 422, ""},
		{"a form post", `n=1`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"a delivery id with a control character", `{"n": 1}`, []string{api.WebhookDeliveryHeader, "a\tb"}, 422, "delivery id"},
		{"over the input cap", `{"x": "` + strings.Repeat("a", 1<<20) + `"}`, nil, 413, ""},
	} {
		a := e.deliver(w.URL, w.Secret, api.WebhookSignatureHeader, []byte(c.body), c.more...)
		if a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.what, a.status, shortBody(a.body), c.status)
			continue
		}
		if c.mention != "" && !strings.Contains(strings.ToLower(string(a.body)), strings.ToLower(c.mention)) {
			t.Errorf("%s: the problem %s does not mention %q", c.what, shortBody(a.body), c.mention)
		}
	}
	if after := e.rowCounts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused bodies changed the tables: %v before, %v after", before, after)
	}
}

// TestWebhookDeliveryIDIsIdempotent: a redelivery with the same delivery
// id (Starflow's header or GitHub's) answers the first run and starts no
// second; another id starts another run.
func TestWebhookDeliveryIDIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	w := e.enableWebhook("alpha", "quick")
	send := func(header, id string) api.WebhookTriggered {
		t.Helper()
		a := e.deliver(w.URL, w.Secret, api.WebhookSignatureHeader, []byte(`{"n": 5}`), header, id)
		if a.status != http.StatusAccepted {
			t.Fatalf("delivery %s: %d %s", id, a.status, a.body)
		}
		var tr api.WebhookTriggered
		a.decode(t, &tr)
		return tr
	}
	runs := func() int {
		t.Helper()
		rs, err := e.store.ListRuns(t.Context(), &state.ListRunsParams{WorkspaceID: "alpha", WorkflowName: "quick", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	first := send(api.WebhookDeliveryHeader, "d-1")
	again := send(api.WebhookDeliveryHeader, "d-1")
	github := send(api.GitHubDeliveryHeader, "d-1")
	if !first.Created || again.Created || github.Created || again.RunID != first.RunID || github.RunID != first.RunID {
		t.Fatalf("deliveries of d-1: %+v, %+v, %+v; want one created run answered three times", first, again, github)
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d runs after three deliveries of one id, want 1", n)
	}
	other := send(api.GitHubDeliveryHeader, "d-2")
	if !other.Created || other.RunID == first.RunID {
		t.Fatalf("delivery d-2: %+v; want a new run", other)
	}
	evs, err := e.store.ListEvents(t.Context(), &state.ListEventsParams{RunID: other.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(evs[0].Payload), `"delivery":"d-2"`) && !strings.Contains(string(evs[0].Payload), `"delivery": "d-2"`) {
		t.Errorf("run_queued payload %s does not name delivery d-2", evs[0].Payload)
	}
	// An API caller's Idempotency-Key of the same text is another key.
	a := e.call("POST", "/run/quick/enqueue", e.keys["alpha/operator"], map[string]any{"input": map[string]any{"n": 5}}, "Idempotency-Key", "d-1")
	if a.status != http.StatusCreated {
		t.Fatalf("enqueue with Idempotency-Key d-1: %d %s, want 201 (a run of its own)", a.status, a.body)
	}
	if n := runs(); n != 3 {
		t.Fatalf("%d runs, want 3", n)
	}
}

// TestWebhookAdmin: enable, read, rotate, disable and enable again, as
// the admin of the workflow's workspace only.
func TestWebhookAdmin(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	admin := e.keys["alpha/admin"]
	get := func() *apiAnswer { return e.call("GET", "/api/workflows/quick/webhook", admin, nil) }
	if a := get(); a.status != http.StatusNotFound {
		t.Fatalf("GET before enabling: %d %s, want 404", a.status, a.body)
	}
	w1 := e.enableWebhook("alpha", "quick")
	var read api.Webhook
	a := get()
	a.decode(t, &read)
	if a.status != http.StatusOK || read.Secret != w1.Secret || read.Generation != 1 || read.URL != w1.URL {
		t.Fatalf("GET: %d %+v; want the enabled webhook, same secret", a.status, read)
	}
	w2 := e.enableWebhook("alpha", "quick")
	if w2.Generation != 2 || w2.Secret == w1.Secret {
		t.Fatalf("rotation: generation %d, secret changed %v; want 2 and a new secret", w2.Generation, w2.Secret != w1.Secret)
	}
	a = e.call("DELETE", "/api/workflows/quick/webhook", admin, nil)
	var off api.Webhook
	a.decode(t, &off)
	if a.status != http.StatusOK || off.Enabled || off.Secret != "" || off.URL != "" || off.Generation != 2 {
		t.Fatalf("DELETE: %d %s; want the webhook disabled at generation 2, without secret or url", a.status, a.body)
	}
	if a := e.call("DELETE", "/api/workflows/quick/webhook", admin, nil); a.status != http.StatusNotFound {
		t.Errorf("DELETE again: %d, want 404", a.status)
	}
	if a := get(); a.status != http.StatusNotFound {
		t.Errorf("GET after disabling: %d, want 404", a.status)
	}
	if a := e.deliver(w2.URL, w2.Secret, api.WebhookSignatureHeader, []byte(`{}`)); a.status != http.StatusUnauthorized {
		t.Errorf("delivery to the disabled webhook: %d, want 401", a.status)
	}
	w3 := e.enableWebhook("alpha", "quick")
	if w3.Generation != 3 || w3.Secret == w2.Secret || w3.Secret == w1.Secret {
		t.Fatalf("enabled again: generation %d; want 3 with a secret never given before", w3.Generation)
	}
	if a := e.deliver(w3.URL, w3.Secret, api.WebhookSignatureHeader, []byte(`{}`)); a.status != http.StatusAccepted {
		t.Errorf("delivery after enabling again: %d %s, want 202", a.status, a.body)
	}
	if a := e.call("POST", "/api/workflows/nope/webhook", admin, nil); a.status != http.StatusNotFound {
		t.Errorf("enabling an unknown workflow: %d, want 404", a.status)
	}
	// Webhooks belong to the whole workspace: a key of one env cannot
	// manage them; a weaker role cannot either.
	envAdmin := e.createKey("alpha", "staging", starflowtype.RoleAdmin)
	e.enableWebhook("alpha", "only-alpha") // beta has no such workflow
	for _, c := range []struct {
		key    string
		status int
		path   string
	}{{envAdmin, 403, "quick"}, {e.keys["alpha/operator"], 403, "quick"}, {e.keys["beta/admin"], 404, "only-alpha"}} {
		for _, m := range []string{"POST", "GET", "DELETE"} {
			if a := e.call(m, "/api/workflows/"+c.path+"/webhook", c.key, nil); a.status != c.status {
				t.Errorf("%s webhook of %s with another key: %d %s, want %d", m, c.path, a.status, shortBody(a.body), c.status)
			}
		}
	}
	for _, wf := range []string{"quick", "only-alpha"} {
		var w api.Webhook
		a := e.call("GET", "/api/workflows/"+wf+"/webhook", admin, nil)
		if a.status != http.StatusOK {
			t.Errorf("GET %s after the refusals: %d, want 200 (still enabled)", wf, a.status)
			continue
		}
		if a.decode(t, &w); (wf == "quick" && w.Generation != 3) || (wf == "only-alpha" && w.Generation != 1) {
			t.Errorf("%s after the refusals: generation %d; the refused calls changed it", wf, w.Generation)
		}
	}
}

// TestWebhookWorkspaceIsolation: each workspace's webhook of the same
// workflow name has its own secret, and a delivery lands in the
// workspace the URL names only with that workspace's secret.
func TestWebhookWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	alpha := e.enableWebhook("alpha", "quick")
	beta := e.enableWebhook("beta", "quick")
	if alpha.Secret == beta.Secret || alpha.URL == beta.URL {
		t.Fatalf("alpha's and beta's webhooks of quick share a secret or a URL: %+v %+v", alpha, beta)
	}
	a := e.deliver(beta.URL, beta.Secret, api.WebhookSignatureHeader, []byte(`{"n": 9}`))
	if a.status != http.StatusAccepted {
		t.Fatalf("beta's delivery: %d %s", a.status, a.body)
	}
	var tr api.WebhookTriggered
	a.decode(t, &tr)
	r := e.waitFor(tr.RunID, "succeeded", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunSucceeded })
	if r.WorkspaceID != "beta" {
		t.Fatalf("beta's delivery made a run in workspace %s", r.WorkspaceID)
	}
	if a := e.call("GET", "/api/runs/"+r.ID, e.keys["alpha/admin"], nil); a.status != http.StatusNotFound {
		t.Errorf("alpha's admin reads beta's webhook run: %d, want 404", a.status)
	}
	if a := e.deliver(beta.URL, alpha.Secret, api.WebhookSignatureHeader, []byte(`{}`)); a.status != http.StatusUnauthorized {
		t.Errorf("alpha's secret on beta's URL: %d, want 401", a.status)
	}
}

// TestWebhookOutlivesKeyRotation: a webhook enabled under a wake key
// keeps working while the ring still holds that key (after a new key
// signs), and is refused — GET 409, deliveries 401 — once it has left
// the ring, until it is enabled again.
func TestWebhookOutlivesKeyRotation(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	w := e.enableWebhook("alpha", "quick") // under k1, newAPIEnv's key
	if w.KeyID != "k1" {
		t.Fatalf("key id %q, want k1", w.KeyID)
	}
	k1 := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	k2 := "k2:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	server := func(keys string) string {
		eng, err := starflow.New(starflow.Config{Store: e.store, Workspace: "alpha", NoRunner: true, WakeKeys: keys})
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{Backend: eng, API: &APIConfig{Engine: eng, Rate: -1}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	path := "/api/workflows/quick/trigger?workspace=alpha"
	post := func(base, secret string) int {
		t.Helper()
		body := []byte(`{"n": 3}`)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
		req.Header.Set(api.WebhookSignatureHeader, webhook.Sign(secret, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	rotated := server(k2 + "," + k1) // k2 signs, k1 still verifies
	if got := post(rotated, w.Secret); got != http.StatusAccepted {
		t.Fatalf("a k1 webhook on a ring k2,k1: %d, want 202", got)
	}
	gone := server(k2)
	if got := post(gone, w.Secret); got != http.StatusUnauthorized {
		t.Fatalf("a k1 webhook on a ring without k1: %d, want 401", got)
	}
	req, _ := http.NewRequest("GET", gone+"/api/workflows/quick/webhook", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["alpha/admin"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("GET of a webhook whose key left the ring: %d, want 409", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", gone+"/api/workflows/quick/webhook", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["alpha/admin"])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var re api.Webhook
	if err := json.NewDecoder(resp.Body).Decode(&re); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if re.KeyID != "k2" || re.Generation != 2 {
		t.Fatalf("enabled again on the k2 ring: %+v; want key k2, generation 2", re)
	}
	if got := post(gone, re.Secret); got != http.StatusAccepted {
		t.Fatalf("the rotated webhook: %d, want 202", got)
	}
}

// TestWebhookRateLimited: deliveries share the API's rate, per client
// address, refused with 429 and Retry-After before anything is read.
func TestWebhookRateLimited(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, func(c *APIConfig) { c.Rate, c.Burst = 0.01, 2 })
	w := e.enableWebhook("alpha", "quick")
	var statuses []int
	for range 3 {
		a := e.deliver(w.URL, w.Secret, api.WebhookSignatureHeader, []byte(`{}`))
		statuses = append(statuses, a.status)
		if a.status == http.StatusTooManyRequests && a.header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if fmt.Sprint(statuses) != "[202 202 429]" {
		t.Fatalf("three deliveries at once with a burst of 2: %v, want [202 202 429]", statuses)
	}
}

// TestWebhookTriggerBypassesCrossOriginCheck: a browser-like cross-site
// POST reaches the signature check (the signature is the authority, as a
// wake token is), while the admin routes stay refused cross-site.
func TestWebhookTriggerBypassesCrossOriginCheck(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	w := e.enableWebhook("alpha", "quick")
	cross := []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}
	if a := e.deliver(w.URL, w.Secret, api.WebhookSignatureHeader, []byte(`{}`), cross...); a.status != http.StatusAccepted {
		t.Errorf("a cross-site signed delivery: %d %s, want 202", a.status, a.body)
	}
	if a := e.call("POST", "/api/workflows/quick/webhook", e.keys["alpha/admin"], nil, cross...); a.status != http.StatusForbidden {
		t.Errorf("a cross-site rotation: %d, want 403", a.status)
	}
}

// TestWebhookTriggerPG: the same on PostgreSQL — a refused delivery
// writes no run, a signed one starts one, a redelivery of its id none.
func TestWebhookTriggerPG(t *testing.T) {
	t.Parallel()
	e := newAPIEnvPG(t)
	w := e.enableWebhook("alpha", "quick")
	count := func() int {
		t.Helper()
		rs, err := e.store.ListRuns(t.Context(), &state.ListRunsParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	before := count()
	old := *w
	w = e.enableWebhook("alpha", "quick")
	for _, secret := range []string{"", old.Secret, "sfwh_" + strings.Repeat("1", 64)} {
		if a := e.deliver(w.URL, secret, api.WebhookSignatureHeader, []byte(`{"n": 1}`)); a.status != http.StatusUnauthorized {
			t.Fatalf("secret %q: %d %s, want 401", secret, a.status, a.body)
		}
	}
	if n := count(); n != before {
		t.Fatalf("refused deliveries made %d runs", n-before)
	}
	var ids []string
	for range 2 {
		a := e.deliver(w.URL, w.Secret, api.GitHubSignatureHeader, []byte(`{"n": 2}`), api.GitHubDeliveryHeader, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		if a.status != http.StatusAccepted {
			t.Fatalf("signed delivery: %d %s", a.status, a.body)
		}
		var tr api.WebhookTriggered
		a.decode(t, &tr)
		ids = append(ids, tr.RunID)
	}
	if ids[0] != ids[1] || count() != before+1 {
		t.Fatalf("two deliveries of one id: runs %v, %d new; want one run", ids, count()-before)
	}
	e.waitFor(ids[0], "succeeded", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunSucceeded })
}
