package httpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// routeCase is one route of the authorization matrix.
type routeCase struct {
	method, route string
	// need is the weakest role allowed; "" for a public route.
	need starflowtype.Role
	// scoped: the route names a resource of a workspace, so a caller of
	// another workspace gets 404.
	scoped bool
	// ok is the status of an allowed call.
	ok int
	// prep returns the request's path and body for a resource of
	// workspace ws; fresh asks for a resource no other call touched (the
	// call is expected to succeed and may change it).
	prep func(e *apiEnv, ws string, fresh bool) (path string, body any)
}

// fixed is a prep without a resource.
func fixed(path string, body any) func(*apiEnv, string, bool) (string, any) {
	return func(*apiEnv, string, bool) (string, any) { return path, body }
}

// runRoute is a prep naming a run made by mk (shared unless fresh).
func runRoute(format string, body any, mk func(*apiEnv, string) *starflowtype.Run) func(*apiEnv, string, bool) (string, any) {
	shared := map[string]string{}
	return func(e *apiEnv, ws string, fresh bool) (string, any) {
		id := shared[ws]
		if fresh || id == "" {
			id = mk(e, ws).ID
			if !fresh {
				shared[ws] = id
			}
		}
		return fmt.Sprintf(format, id), body
	}
}

// allRoutes is every route of the listener with a key-protected or
// public apiAnswer: the matrix checks each.
func allRoutes() []routeCase {
	viewer, operator, admin, worker := starflowtype.RoleViewer, starflowtype.RoleOperator, starflowtype.RoleAdmin, starflowtype.RoleWorker
	ended := (*apiEnv).ended
	return []routeCase{
		{"PUT", "/api/workflows/{name}", admin, false, 200, fixed("/api/workflows/quick", quickWF)},
		{"GET", "/api/workflows", viewer, false, 200, fixed("/api/workflows", nil)},
		{"GET", "/api/workflows/{name}", viewer, true, 200, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/api/workflows/only-" + ws, nil
		}},
		{"GET", "/api/workflows/{name}/revisions", viewer, true, 200, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/api/workflows/only-" + ws + "/revisions", nil
		}},
		{"GET", "/api/workflows/{name}/revisions/{revision}", viewer, true, 200, func(e *apiEnv, ws string, _ bool) (string, any) {
			return "/api/workflows/only-" + ws + "/revisions/" + e.revision(ws, "only-"+ws), nil
		}},
		{"POST", "/admin/validate", viewer, false, 200, fixed("/admin/validate", quickWF)},
		{"POST", "/api/workflows/{name}/plan", viewer, false, 200, fixed("/api/workflows/quick/plan", quickWF)},
		{"POST", "/run/{workflow}/enqueue", operator, true, 201, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/run/only-" + ws + "/enqueue", map[string]any{"input": map[string]any{"n": 2}}
		}},
		{"GET", "/api/runs", viewer, false, 200, fixed("/api/runs?status=succeeded&limit=5", nil)},
		{"GET", "/api/runs/{id}", viewer, true, 200, runRoute("/api/runs/%s", nil, ended)},
		{"GET", "/api/runs/{id}/ledger", viewer, true, 200, runRoute("/api/runs/%s/ledger", nil, ended)},
		{"GET", "/api/runs/{id}/events", viewer, true, 200, runRoute("/api/runs/%s/events?after=1", nil, ended)},
		{"GET", "/api/runs/{id}/checkpoints", viewer, true, 200, runRoute("/api/runs/%s/checkpoints", nil, ended)},
		{"GET", "/api/runs/{id}/waits", viewer, true, 200, runRoute("/api/runs/%s/waits", nil, ended)},
		{"GET", "/api/runs/{id}/children", viewer, true, 200, runRoute("/api/runs/%s/children", nil, ended)},
		{"POST", "/api/runs/{id}/resume", admin, true, 200, runRoute("/api/runs/%s/resume", map[string]any{"mode": "replay"}, (*apiEnv).cancelled)},
		{"POST", "/api/runs/{id}/cancel", operator, true, 200, runRoute("/api/runs/%s/cancel", nil, (*apiEnv).paused)},
		{"POST", "/api/runs/{id}/retrigger", operator, true, 200, runRoute("/api/runs/%s/retrigger", nil, ended)},
		{"POST", "/api/runs/{id}/signal", operator, true, 200, runRoute("/api/runs/%s/signal", map[string]any{"name": "go", "payload": 1}, (*apiEnv).paused)},
		{"POST", "/api/signals", operator, false, 200, fixed("/api/signals", map[string]any{"name": "go", "correlation_key": "k-1"})},
		{"GET", "/api/dead-letters", viewer, false, 200, fixed("/api/dead-letters", nil)},
		{"POST", "/api/dead-letters/{id}/redrive", operator, true, 200, runRoute("/api/dead-letters/%s/redrive", nil, (*apiEnv).deadLetter)},
		{"GET", "/api/sessions/{session}/vars", viewer, false, 200, fixed("/api/sessions/s1/vars", nil)},
		{"GET", "/api/sessions/{session}/vars/{key}", viewer, true, 200, func(e *apiEnv, ws string, _ bool) (string, any) {
			e.sessionVar(ws, "only-"+ws, "k")
			return "/api/sessions/only-" + ws + "/vars/k", nil
		}},
		{"PUT", "/api/sessions/{session}/vars/{key}", operator, false, 200, fixed("/api/sessions/s1/vars/k", map[string]any{"value": map[string]any{"a": 1}})},
		{"DELETE", "/api/sessions/{session}/vars/{key}", operator, true, 204, func(e *apiEnv, ws string, fresh bool) (string, any) {
			key := "shared"
			if fresh {
				key = fmt.Sprintf("fresh-%d", e.seq())
			}
			e.sessionVar(ws, "del-"+ws, key)
			return "/api/sessions/del-" + ws + "/vars/" + key, nil
		}},
		{"POST", "/api/keys", admin, false, 201, fixed("/api/keys", map[string]any{"name": "made", "role": "viewer"})},
		{"GET", "/api/keys", admin, false, 200, fixed("/api/keys", nil)},
		{"DELETE", "/api/keys/{id}", admin, true, 200, func(e *apiEnv, ws string, _ bool) (string, any) {
			k, err := e.store.CreateAPIKey(context.Background(), &state.CreateAPIKeyParams{WorkspaceID: ws, Role: viewer, Name: "victim", KeyHash: fmt.Sprintf("%064d", e.seq())})
			if err != nil {
				e.t.Fatal(err)
			}
			return "/api/keys/" + k.ID, nil
		}},
		{"GET", "/api/live/runs/{id}", viewer, true, 200, runRoute("/api/live/runs/%s", nil, ended)},
		{"GET", "/api/live/runs", viewer, false, 200, fixed("/api/live/runs", nil)},
		{"GET", "/live/runs/{id}", viewer, true, 200, runRoute("/live/runs/%s", nil, (*apiEnv).endedWarm)},
		{"GET", "/live/runs/{id}/events", viewer, true, 200, runRoute("/live/runs/%s/events", nil, (*apiEnv).endedWarm)},
		{"GET", "/live/runners", viewer, false, 200, fixed("/live/runners", nil)},
		{"GET", "/metrics", viewer, false, 200, fixed("/metrics", nil)},
		{"GET", "/api/me", viewer, false, 200, fixed("/api/me", nil)},
		{"GET", "/api/health", viewer, false, 200, fixed("/api/health", nil)},
		{"GET", "/healthz", "", false, 200, fixed("/healthz", nil)},
		{"GET", "/readyz", "", false, 200, fixed("/readyz", nil)},
		{"GET", "/openapi.json", "", false, 200, fixed("/openapi.json", nil)},
		{"POST", "/wake/{token}", "", false, 401, fixed("/wake/not-a-token", nil)},
		{"POST", "/api/jobs/poll", worker, false, 204, fixed("/api/jobs/poll", map[string]any{"types": []string{"none-such"}, "worker": "w"})},
		{"POST", "/api/jobs/{id}/heartbeat", worker, true, 200, jobRoute("heartbeat", nil)},
		{"POST", "/api/jobs/{id}/complete", worker, true, 200, jobRoute("complete", map[string]any{"output": 1})},
		{"POST", "/api/jobs/{id}/fail", worker, true, 200, jobRoute("fail", map[string]any{"error": map[string]any{"type": "x", "message": "m"}})},
		{"POST", "/api/workflows/{name}/webhook", admin, true, 200, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/api/workflows/only-" + ws + "/webhook", nil
		}},
		{"GET", "/api/workflows/{name}/webhook", admin, true, 200, webhookRoute},
		{"DELETE", "/api/workflows/{name}/webhook", admin, true, 200, webhookRoute},
		// Unsigned: 401 for every caller, key or none (the signature is
		// the trigger's only credential).
		{"POST", "/api/workflows/{name}/trigger", "", false, 401, fixed("/api/workflows/quick/trigger", map[string]any{"n": 1})},
		{"GET", "/api/schedules", viewer, false, 200, fixed("/api/schedules", nil)},
		{"POST", "/api/schedules/{workflow}/pause", operator, true, 200, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/api/schedules/only-" + ws + "/pause", nil
		}},
		{"POST", "/api/schedules/{workflow}/resume", operator, true, 200, func(_ *apiEnv, ws string, _ bool) (string, any) {
			return "/api/schedules/only-" + ws + "/resume", nil
		}},
	}
}

// jobWF parks at a remote worker's job.
const jobWF = `name: jobbed
steps:
  - id: work
    job: {type: matrix}
`

// jobRoute is a prep naming a job of ws held by a worker (a fresh one when
// fresh), its fencing token put in body.
func jobRoute(action string, body map[string]any) func(*apiEnv, string, bool) (string, any) {
	shared := map[string]*starflowtype.WorkerJob{}
	return func(e *apiEnv, ws string, fresh bool) (string, any) {
		j := shared[ws]
		if fresh || j == nil {
			j = e.heldJob(ws)
			if !fresh {
				shared[ws] = j
			}
		}
		b := map[string]any{"fencing_token": j.LeaseToken}
		for k, v := range body {
			b[k] = v
		}
		return "/api/jobs/" + j.ID + "/" + action, b
	}
}

// heldJob enqueues a run of jobWF in ws and claims its job.
func (e *apiEnv) heldJob(ws string) *starflowtype.WorkerJob {
	e.t.Helper()
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: ws})
	if _, err := e.eng.Apply(ctx, "jobbed.yaml", []byte(jobWF)); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.eng.Enqueue(ctx, "jobbed", map[string]any{}, nil); err != nil {
		e.t.Fatal(err)
	}
	j, err := e.eng.PollJob(context.Background(), ws, []string{"matrix"}, "matrix-worker", 10*time.Second)
	if err != nil || j == nil {
		e.t.Fatalf("claim a job of %s: %v %v", ws, j, err)
	}
	return j
}

// webhookRoute is a prep naming workspace ws's workflow only-WS with its
// webhook enabled.
func webhookRoute(e *apiEnv, ws string, _ bool) (string, any) {
	if _, err := e.eng.EnableWebhook(starflow.WithScope(context.Background(), starflow.Scope{Workspace: ws}), "only-"+ws); err != nil {
		e.t.Fatal(err)
	}
	return "/api/workflows/only-" + ws + "/webhook", nil
}

// revision is the current revision of workflow name in workspace ws.
func (e *apiEnv) revision(ws, name string) string {
	e.t.Helper()
	d, err := e.store.GetDefinition(context.Background(), &state.GetDefinitionParams{WorkspaceID: ws, Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return d.Revision
}

// sessionVar writes a session variable of workspace ws.
func (e *apiEnv) sessionVar(ws, session, key string) {
	e.t.Helper()
	if _, err := e.store.SessionSet(context.Background(), &state.SessionSetParams{
		WorkspaceID: ws, SessionID: session, Key: key, Value: json.RawMessage(`"v"`),
	}); err != nil {
		e.t.Fatal(err)
	}
}

var seqN atomic.Int64

// seq is a number no other call of the package's tests got.
func (e *apiEnv) seq() int { return int(seqN.Add(1)) }

// TestAuthorizationMatrix calls every route as no key, viewer, operator
// and admin of workspace alpha, on a resource of alpha and of beta: no
// key is 401, a weaker role 403, another workspace's resource 404, and
// an allowed call its documented status. Public routes apiAnswer everyone.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	callers := []string{"", "alpha/viewer", "alpha/operator", "alpha/admin", "alpha/worker"}
	for _, rc := range allRoutes() {
		for _, target := range []string{"alpha", "beta"} {
			for _, caller := range callers {
				role := starflowtype.Role(strings.TrimPrefix(caller, "alpha/"))
				want := rc.ok
				switch {
				case rc.need == "":
				case caller == "":
					want = http.StatusUnauthorized
				case !role.Allows(rc.need):
					want = http.StatusForbidden
				case rc.scoped && target == "beta":
					want = http.StatusNotFound
				}
				path, body := rc.prep(e, target, want == rc.ok && rc.need != "")
				a := e.call(rc.method, path, e.keys[caller], body)
				if a.status != want {
					t.Errorf("%s %s as %q on %s's: %d %s, want %d", rc.method, path, orNone(caller), target, a.status, shortBody(a.body), want)
					continue
				}
				if a.status >= 400 && rc.route != "/wake/{token}" {
					var p api.Problem
					if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
						t.Errorf("%s %s as %q: %d with Content-Type %q, want application/problem+json", rc.method, path, orNone(caller), a.status, ct)
					} else if a.decode(t, &p); p.Status != a.status || p.Title == "" {
						t.Errorf("%s %s: problem %+v does not carry status %d and a title", rc.method, path, p, a.status)
					}
				}
			}
		}
	}
}

func orNone(caller string) string {
	if caller == "" {
		return "no key"
	}
	return caller
}

func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestEveryRouteNeedsAKeyOnceOneExists: with keys configured no
// protected route answers without one — the routes of the OpenAPI
// document included, so a route added later is covered — and a
// malformed, unknown or revoked key is 401 everywhere.
func TestEveryRouteNeedsAKeyOnceOneExists(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	doc := e.call("GET", "/openapi.json", "", nil)
	var oa struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	doc.decode(t, &oa)
	revoked := e.createKey("alpha", "", starflowtype.RoleAdmin)
	e.revoke(revoked)
	public := map[string]bool{"/readyz": true, "/api/workflows/{name}/trigger": true}
	n := 0
	for path, ops := range oa.Paths {
		for method := range ops {
			if public[path] {
				continue
			}
			p := strings.NewReplacer("{id}", "00000000-0000-0000-0000-000000000000", "{name}", "quick", "{workflow}", "quick",
				"{session}", "s", "{key}", "k", "{revision}", strings.Repeat("0", 64)).Replace(path)
			for _, key := range []string{"", "sf_malformed", revoked, "sf_" + strings.Repeat("A", 43)} {
				if a := e.call(strings.ToUpper(method), p, key, nil); a.status != http.StatusUnauthorized {
					t.Errorf("%s %s with key %q: %d %s, want 401", strings.ToUpper(method), p, key, a.status, shortBody(a.body))
				} else if a.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", method, p)
				}
			}
			n++
		}
	}
	if n < 30 {
		t.Fatalf("the OpenAPI document lists %d protected operations; want the whole API (30 or more)", n)
	}
}
