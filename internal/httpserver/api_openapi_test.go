package httpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/state"
)

// TestOpenAPIDocument fetches /openapi.json, validates it as OpenAPI
// 3.1, and calls every operation it documents as an admin, checking the
// documented status and that the apiAnswer matches the document's schema.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	raw := e.call("GET", "/openapi.json", "", nil)
	if raw.status != 200 {
		t.Fatalf("GET /openapi.json: %d %s", raw.status, shortBody(raw.body))
	}
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	raw.decode(t, &head)
	if !strings.HasPrefix(head.OpenAPI, "3.1") {
		t.Fatalf("openapi %q, want 3.1.x", head.OpenAPI)
	}
	doc, err := libopenapi.NewDocument(raw.body)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, ve := range verrs {
			t.Errorf("the document breaks the OpenAPI 3.1 schema: %s (%s)", ve.Message, ve.Reason)
		}
		t.FailNow()
	}
	var oa struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	raw.decode(t, &oa)
	cases := map[string]routeCase{}
	for _, rc := range allRoutes() {
		cases[rc.method+" "+rc.route] = rc
	}
	var ops []string
	for path, methods := range oa.Paths {
		for m := range methods {
			ops = append(ops, strings.ToUpper(m)+" "+path)
		}
	}
	sort.Strings(ops)
	for _, opKey := range ops {
		rc, ok := cases[opKey]
		if !ok {
			t.Errorf("%s is documented but has no case in allRoutes: add one (the matrix and this test then call it)", opKey)
			continue
		}
		path, body := rc.prep(e, "alpha", true)
		req, resp := e.do(rc.method, path, e.keys["alpha/admin"], body)
		if resp.StatusCode != rc.ok {
			t.Errorf("%s: %d, want %d", opKey, resp.StatusCode, rc.ok)
			continue
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			continue // the stream's messages are described in prose
		}
		if ok, verrs := v.ValidateHttpResponse(req, resp); !ok {
			for _, ve := range verrs {
				t.Errorf("%s: the apiAnswer does not match the document: %s (%s)", opKey, ve.Message, ve.Reason)
			}
		}
	}
}

// do sends one request and returns it with its apiAnswer (body buffered).
func (e *apiEnv) do(method, path, key string, body any) (*http.Request, *http.Response) {
	e.t.Helper()
	var raw []byte
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		raw, ct = []byte(b), "application/yaml"
	default:
		raw, _ = json.Marshal(b)
		ct = "application/json"
	}
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	b := readAnswer(e.t, resp)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return req, resp
}

// TestBadRequestsAreProblems: malformed bodies, wrong types, unknown
// fields and bad parameters get a 4xx problem naming what is wrong, and
// nothing is written.
func TestBadRequestsAreProblems(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	op := e.keys["alpha/admin"]
	run := e.ended("alpha")
	cases := []struct {
		method, path string
		body         any
		status       int
		mention      string
	}{
		{"POST", "/run/quick/enqueue", `{"input": {"n": 1}`, 400, ""},
		{"POST", "/run/quick/enqueue", `{"input": "text"}`, 400, "object"},
		{"POST", "/run/quick/enqueue", `{"input": {"n": "one"}}`, 400, "n"},
		{"POST", "/run/quick/enqueue", `{"input": {}, "priority": "high"}`, 422, "priority"},
		{"POST", "/run/quick/enqueue", `{"input": {}, "surprise": 1}`, 422, "surprise"},
		{"POST", "/run/quick/enqueue", `{}`, 422, "input"},
		{"POST", "/run/quick/enqueue", `{"input": {}, "delay": "soon"}`, 400, "delay"},
		{"POST", "/run/quick/enqueue", `{"input": {}, "recovery_mode": "sometimes"}`, 422, "recovery_mode"},
		{"POST", "/run/quick/enqueue", `{"input": {"n": 1e400}}`, 400, ""},
		{"POST", "/run/nope/enqueue", `{"input": {}}`, 404, "nope"},
		{"GET", "/api/runs?limit=0", nil, 422, "limit"},
		{"GET", "/api/runs?limit=lots", nil, 422, "limit"},
		{"GET", "/api/runs?status=sleeping", nil, 422, "status"},
		{"GET", "/api/runs?cursor=***", nil, 400, ""},
		{"GET", "/api/runs?cursor=bm90LWEtY3Vyc29y", nil, 400, "cursor"},
		{"GET", "/api/runs?created_after=yesterday", nil, 422, "created_after"},
		{"GET", "/api/runs?bogus=1", nil, 422, "bogus"},
		{"GET", "/api/runs/zz", nil, 422, "id"},
		{"GET", "/api/runs/zzzzzzzz", nil, 400, "prefix"},
		{"GET", "/api/runs/" + run.ID[:8] + "/events?after=-1", nil, 422, "after"},
		{"POST", "/api/runs/" + run.ID + "/resume", `{"mode": "sideways"}`, 422, "mode"},
		{"POST", "/api/runs/" + run.ID + "/signal", `{"payload": 1}`, 422, "name"},
		{"POST", "/api/runs/" + run.ID + "/signal", `{"name": "starflow.child", "payload": {"forged": true}}`, 400, "reserved"},
		{"POST", "/api/signals", `{"name": "starflow.child", "correlation_key": "x"}`, 400, "reserved"},
		{"PUT", "/api/workflows/quick", "name: quick\nsteps: [", 422, ""},
		{"PUT", "/api/workflows/other", quickWF, 422, "other"},
		{"PUT", "/api/sessions/s/vars/k", `{"value": 1, "keep_for": "forever"}`, 400, "keep_for"},
		{"POST", "/api/keys", `{"name": "x", "role": "root"}`, 422, "role"},
		{"GET", "/api/runs/" + run.ID + "/nothing", nil, 404, ""},
		{"POST", "/run/quick/enqueue", `{"input": {"x": "` + strings.Repeat("a", 1<<20+20<<10) + `"}}`, 413, "limits.input_bytes"},
		{"POST", "/run/quick/enqueue", `{"input": {"x": "` + strings.Repeat("a", 2<<20) + `"}}`, 413, ""},
	}
	before, err := e.store.ListRuns(t.Context(), &state.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var body any
		if c.body != nil {
			body = []byte(c.body.(string))
		}
		a := e.call(c.method, c.path, op, body, "Content-Type", "application/json")
		if a.status != c.status {
			t.Errorf("%s %s %v: %d %s, want %d", c.method, c.path, c.body, a.status, shortBody(a.body), c.status)
			continue
		}
		var p api.Problem
		if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s: Content-Type %q, want application/problem+json", c.method, c.path, ct)
			continue
		}
		a.decode(t, &p)
		if c.mention != "" && !strings.Contains(strings.ToLower(string(a.body)), strings.ToLower(c.mention)) {
			t.Errorf("%s %s: the problem %s does not mention %q", c.method, c.path, shortBody(a.body), c.mention)
		}
	}
	after, err := e.store.ListRuns(t.Context(), &state.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("bad requests created %d runs", len(after)-len(before))
	}
}
