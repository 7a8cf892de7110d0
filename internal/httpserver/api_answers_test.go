package httpserver

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// problemOf decodes a problem answer with the status want.
func problemOf(t *testing.T, what string, a *apiAnswer, want int) *api.Problem {
	t.Helper()
	if a.status != want {
		t.Fatalf("%s: %d %s, want %d", what, a.status, shortBody(a.body), want)
	}
	var p api.Problem
	a.decode(t, &p)
	return &p
}

// noStorePrefix fails when a problem carries a store package's name or a
// sentinel's suffix (the status and code say it).
func noStorePrefix(t *testing.T, what string, p *api.Problem) {
	t.Helper()
	for _, leak := range []string{"sqlitestore", "pgstore", ": conflict", ": lease lost", ": no_checkpoint"} {
		if strings.Contains(p.Detail, leak) {
			t.Errorf("%s: detail %q carries %q", what, p.Detail, leak)
		}
	}
}

// TestConflictsSpeakPlainly: a 409 says what is wrong in the engine's
// words, never with a store package's prefix; a resume refused for want
// of a checkpoint names the body field that gets past it, and one of a
// succeeded run says which runs can be resumed.
func TestConflictsSpeakPlainly(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	op, admin := e.keys["alpha/operator"], e.keys["alpha/admin"]

	done := e.ended("alpha")
	p := problemOf(t, "cancel an ended run", e.call("POST", "/api/runs/"+done.ID+"/cancel", op, nil), http.StatusConflict)
	noStorePrefix(t, "cancel", p)
	if p.Code != api.CodeConflict || p.Detail != "run "+done.ID+" already ended succeeded" {
		t.Errorf("cancel an ended run: %+v", p)
	}

	p = problemOf(t, "resume a succeeded run", e.call("POST", "/api/runs/"+done.ID+"/resume", admin, map[string]any{}), http.StatusConflict)
	noStorePrefix(t, "resume succeeded", p)
	if !strings.Contains(p.Detail, "only an interrupted, failed or cancelled run that no runner holds can be resumed") ||
		!strings.Contains(p.Detail, "retrigger it") {
		t.Errorf("resume a succeeded run: %q", p.Detail)
	}

	// A run cancelled before it started has no checkpoint.
	a := e.call("POST", "/run/quick/enqueue", op, map[string]any{"input": map[string]any{}, "delay": "1h"})
	var run api.RunView
	a.decode(t, &run)
	if a := e.call("POST", "/api/runs/"+run.ID+"/cancel", op, nil); a.status != http.StatusOK {
		t.Fatalf("cancel a delayed run: %d %s", a.status, shortBody(a.body))
	}
	p = problemOf(t, "resume without a checkpoint", e.call("POST", "/api/runs/"+run.ID+"/resume", admin, map[string]any{"mode": "resume"}), http.StatusConflict)
	noStorePrefix(t, "no checkpoint", p)
	if p.Code != api.CodeNoCheckpoint || !strings.HasSuffix(p.Detail, api.NoCheckpointHint) || strings.Contains(p.Detail, "--mode") {
		t.Errorf("resume without a checkpoint: %+v", p)
	}
	if a := e.call("POST", "/api/runs/"+run.ID+"/resume", admin, map[string]any{"mode": "replay"}); a.status != http.StatusOK {
		t.Errorf("the hint's body: %d %s", a.status, shortBody(a.body))
	}

	// A worker's stale heartbeat: lease_lost, in plain words.
	const src = "name: shout\nsteps:\n  - id: up\n    job: {type: upper}\n"
	if a := e.call("PUT", "/api/workflows/shout", admin, src); a.status != http.StatusOK {
		t.Fatalf("apply: %d %s", a.status, shortBody(a.body))
	}
	e.enqueue("alpha", "shout", map[string]any{})
	var job api.Job
	deadline := time.Now().Add(10 * time.Second)
	for job.ID == "" {
		a := e.call("POST", "/api/jobs/poll", e.keys["alpha/worker"], map[string]any{"types": []string{"upper"}, "worker": "w1", "wait_s": 1})
		if a.status == http.StatusOK {
			a.decode(t, &job)
		} else if time.Now().After(deadline) {
			t.Fatalf("no job: %d %s", a.status, shortBody(a.body))
		}
	}
	p = problemOf(t, "stale heartbeat", e.call("POST", "/api/jobs/"+job.ID+"/heartbeat", e.keys["alpha/worker"], map[string]any{"fencing_token": "0000"}), http.StatusConflict)
	noStorePrefix(t, "heartbeat", p)
	if p.Code != api.CodeLeaseLost || !strings.HasPrefix(p.Detail, "job "+job.ID+": the fencing token is not the current claim's") {
		t.Errorf("stale heartbeat: %+v", p)
	}
}

// TestWorkerKeysThroughTheAPI: an admin creates a worker key over the
// API (as on the store), and the key serves jobs; an env that is not a
// name is refused, naming the field.
func TestWorkerKeysThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	admin := e.keys["alpha/admin"]
	a := e.call("POST", "/api/keys", admin, map[string]any{"name": "pool-a", "role": "worker"})
	var ck api.CreatedKey
	if a.status != http.StatusCreated {
		t.Fatalf("create a worker key: %d %s", a.status, shortBody(a.body))
	}
	a.decode(t, &ck)
	if ck.Key.Role != "worker" || ck.Key.WorkspaceID != "alpha" {
		t.Fatalf("created %+v", ck.Key)
	}
	if a := e.call("POST", "/api/jobs/poll", ck.Secret, map[string]any{"types": []string{"upper"}, "worker": "w1"}); a.status != http.StatusNoContent {
		t.Errorf("the worker key polls: %d %s", a.status, shortBody(a.body))
	}
	if a := e.call("GET", "/api/runs", ck.Secret, nil); a.status != http.StatusForbidden {
		t.Errorf("the worker key reads runs: %d", a.status)
	}
	for _, env := range []string{"../../x", "Prod", "a b", "x\x1b[31m"} {
		p := problemOf(t, "env "+env, e.call("POST", "/api/keys", admin, map[string]any{"name": "bad", "role": "viewer", "env": env}), http.StatusUnprocessableEntity)
		if len(p.Errors) != 1 || p.Errors[0].Location != "body.env" {
			t.Errorf("env %q: %+v, want one error at body.env", env, p)
		}
	}
}

// TestEnqueueBoundsAreTheEngines: the OpenAPI document states the
// engine's bounds of an enqueue (starflow.PriorityMax, …), which the
// engine also checks, so the API and a direct enqueue refuse the same;
// an unknown revision of a known workflow says so.
func TestEnqueueBoundsAreTheEngines(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string
				Schema struct{ MaxLength float64 }
			}
		}
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct{ Minimum, Maximum, MaxLength float64 }
			}
		}
	}
	e.call("GET", "/openapi.json", "", nil).decode(t, &doc)
	props := doc.Components.Schemas["EnqueueRequest"].Properties
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"priority minimum", props["priority"].Minimum, -starflow.PriorityMax},
		{"priority maximum", props["priority"].Maximum, starflow.PriorityMax},
		{"pool maxLength", props["pool"].MaxLength, starflow.PoolNameMax},
		{"max_attempts maximum", props["max_attempts"].Maximum, starflow.MaxAttemptsMax},
	} {
		if c.got != c.want {
			t.Errorf("EnqueueRequest %s is %v, the engine's %v", c.what, c.got, c.want)
		}
	}
	found := false
	for _, p := range doc.Paths["/run/{workflow}/enqueue"]["post"].Parameters {
		if p.Name == "Idempotency-Key" {
			found = true
			if p.Schema.MaxLength != starflow.IdempotencyKeyMax {
				t.Errorf("Idempotency-Key maxLength %v, the engine's %d", p.Schema.MaxLength, starflow.IdempotencyKeyMax)
			}
		}
	}
	if !found {
		t.Error("no Idempotency-Key parameter in the document")
	}

	op := e.keys["alpha/operator"]
	p := problemOf(t, "an unknown revision", e.call("POST", "/run/quick/enqueue", op, map[string]any{"input": map[string]any{}, "revision": "deadbeef"}), http.StatusNotFound)
	if !strings.HasPrefix(p.Detail, `workflow "quick" has no revision "deadbeef" (`) {
		t.Errorf("an unknown revision: %q", p.Detail)
	}
	p = problemOf(t, "an unknown workflow", e.call("POST", "/run/nope/enqueue", op, map[string]any{"input": map[string]any{}}), http.StatusNotFound)
	if p.Detail != `workflow "nope" is not applied` {
		t.Errorf("an unknown workflow: %q", p.Detail)
	}
}

// TestDurationsTooLargeSaySo: a delay or keep_for written right but too
// large for a duration is refused as too large, naming the bound; one
// written wrong still says how to write it.
func TestDurationsTooLargeSaySo(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	op := e.keys["alpha/operator"]
	p := problemOf(t, "delay 99999999h", e.call("POST", "/run/quick/enqueue", op, map[string]any{"input": map[string]any{}, "delay": "99999999h"}), http.StatusBadRequest)
	if p.Detail != `delay "99999999h" is too large: at most 2562047h (about 292 years)` {
		t.Errorf("delay 99999999h: %q", p.Detail)
	}
	p = problemOf(t, "delay soon", e.call("POST", "/run/quick/enqueue", op, map[string]any{"input": map[string]any{}, "delay": "soon"}), http.StatusBadRequest)
	if !strings.Contains(p.Detail, "want a duration such as 30s or 1h") {
		t.Errorf("delay soon: %q", p.Detail)
	}
	p = problemOf(t, "keep_for 99999999h", e.call("PUT", "/api/sessions/s1/vars/k", op, map[string]any{"value": 1, "keep_for": "99999999h"}), http.StatusBadRequest)
	if p.Detail != `keep_for "99999999h" is too large: at most 2562047h (about 292 years)` {
		t.Errorf("keep_for 99999999h: %q", p.Detail)
	}
}

// TestNonFiniteNumbersNamed: a number with no finite value (1e400) in a
// JSON body is 400 naming the number and where it is (the body path, line
// and column), as POST /wake/{token} answers, never the decoder's
// "cannot unmarshal … into float64"; nothing is created.
func TestNonFiniteNumbersNamed(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	op := e.keys["alpha/operator"]
	run := e.paused("alpha")
	for _, c := range []struct{ path, body, location string }{
		{"/run/quick/enqueue", `{"input": {"quantity": 1e400}}`, "body.input.quantity"},
		{"/api/runs/" + run.ID + "/signal", `{"name": "go", "payload": {"n": [1, -1e400]}}`, "body.payload.n[1]"},
		{"/api/signals", `{"name": "go", "correlation_key": "k", "payload": 1e999}`, "body.payload"},
	} {
		p := problemOf(t, c.path, e.call("POST", c.path, op, []byte(c.body), "Content-Type", "application/json"), http.StatusBadRequest)
		if strings.Contains(p.Error(), "unmarshal") || !strings.Contains(p.Detail, "is out of range: JSON numbers must be finite") ||
			!strings.Contains(p.Detail, "(line 1, column ") || len(p.Errors) != 1 || p.Errors[0].Location != c.location {
			t.Errorf("%s %s: %+v, want the number named at %s", c.path, c.body, p, c.location)
		}
	}
	if r := e.waitFor(run.ID, "still paused", func(r *starflowtype.Run) bool { return true }); r.Status != starflowtype.RunPaused {
		t.Errorf("the refused signal woke the run: %s", r.Status)
	}
}

// TestTooLargeBodiesNameTheirCap: a body too large for its route is 413
// naming the cap and how to raise it, however far over it is (huma's
// own answer, "request body is too large limit=…", named neither).
func TestTooLargeBodiesNameTheirCap(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	op, admin := e.keys["alpha/operator"], e.keys["alpha/admin"]
	run := e.paused("alpha")
	big := strings.Repeat("a", 2<<20)
	for _, c := range []struct {
		method, path, key, body, cap string
	}{
		{"PUT", "/api/workflows/quick", admin, "name: quick\n# " + big + "\n", "limits.definition_bytes; raise it with --max-definition-bytes"},
		{"POST", "/admin/validate", admin, "name: quick\n# " + big + "\n", "limits.definition_bytes"},
		{"POST", "/run/quick/enqueue", op, `{"input": {"x": "` + big + `"}}`, "limits.input_bytes; raise it with --max-input-bytes"},
		{"POST", "/api/runs/" + run.ID + "/signal", op, `{"name": "go", "payload": "` + big + `"}`, "limits.payload_bytes; raise it with --max-payload-bytes"},
		{"POST", "/api/signals", op, `{"name": "go", "correlation_key": "k", "payload": "` + big + `"}`, "limits.payload_bytes"},
		{"PUT", "/api/sessions/s1/vars/k", op, `{"value": "` + big + `"}`, "limits.payload_bytes"},
		{"POST", "/api/workflows/quick/trigger", "", `{"x": "` + big + `"}`, "limits.input_bytes"},
	} {
		p := problemOf(t, c.method+" "+c.path, e.call(c.method, c.path, c.key, []byte(c.body), "Content-Type", "application/json"), http.StatusRequestEntityTooLarge)
		if !strings.Contains(p.Detail, "exceeds the limit of") || !strings.Contains(p.Detail, c.cap) || strings.Contains(p.Detail, "limit=") {
			t.Errorf("%s %s: %q, want the cap %q named", c.method, c.path, p.Detail, c.cap)
		}
	}
	// Just over the session value's cap, inside the envelope: the same
	// words, from the handler.
	p := problemOf(t, "a session value over its cap", e.call("PUT", "/api/sessions/s1/vars/k", op, map[string]any{"value": strings.Repeat("b", 1<<20)}), http.StatusRequestEntityTooLarge)
	if !strings.Contains(p.Detail, "the value (1048578 bytes as JSON) exceeds the limit of 1048576 (limits.payload_bytes") {
		t.Errorf("a session value over its cap: %q", p.Detail)
	}
}

// TestSyntaxErrorsCarryWhatIsKnown: a YAML syntax error is answered with
// its line and no column (the YAML parser gives none): /admin/validate
// leaves column out instead of 0, PUT's location is body:LINE; a pasted
// Markdown fence is named on line 1, column 1.
func TestSyntaxErrorsCarryWhatIsKnown(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	admin := e.keys["alpha/admin"]
	src := "name: quick\nsteps:\n  - id: x\n    pass: [1, 2\n"
	a := e.call("POST", "/admin/validate", admin, src)
	var raw struct {
		Valid  bool
		Errors []map[string]any
	}
	a.decode(t, &raw)
	if raw.Valid || len(raw.Errors) != 1 || raw.Errors[0]["line"] != 4.0 || raw.Errors[0]["column"] != nil {
		t.Errorf("validate: %s, want line 4 and no column", a.body)
	}
	p := problemOf(t, "PUT", e.call("PUT", "/api/workflows/quick", admin, src), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body:4" {
		t.Errorf("PUT: %+v, want location body:4", p.Errors)
	}
	a = e.call("POST", "/admin/validate", admin, "```yaml\n"+quickWF+"```\n")
	a.decode(t, &raw)
	if len(raw.Errors) != 1 || raw.Errors[0]["line"] != 1.0 || raw.Errors[0]["column"] != 1.0 ||
		!strings.Contains(raw.Errors[0]["message"].(string), "Markdown code fence") {
		t.Errorf("a fenced definition: %s", a.body)
	}
	// A problem with a full position keeps both.
	p = problemOf(t, "PUT unknown field", e.call("PUT", "/api/workflows/quick", admin, "name: quick\nsteps:\n  - id: a\n    context_set: {x: 1}\n    colour: red\n"), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body:5:5" {
		t.Errorf("PUT unknown field: %+v, want body:5:5", p.Errors)
	}
}

func TestMayHoldNonFinite(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"input": {"n": 1}}`: false, `{"name": "e", "x": 2.5}`: false, `{"x": 1e400}`: true, `{"x": -1.5E+9}`: true,
		`{"x": 2e-3}`: true, `{"x": "` + strings.Repeat("9", 309) + `"}`: true, `{"x": ` + strings.Repeat("9", 308) + `}`: false,
		`{"x": 1.` + strings.Repeat("9", 400) + `}`: true,
	} {
		if got := mayHoldNonFinite([]byte(body)); got != want {
			t.Errorf("mayHoldNonFinite(%.40s) = %v, want %v", body, got, want)
		}
	}
}
