package httpserver

import (
	"context"
	"net/http"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// TestJobWorkerKeyEnvScope: a worker key limited to env staging must
// not claim (and read the input of) a job of a run of env prod in the same
// workspace, as a viewer key of env staging cannot read that run.
func TestJobWorkerKeyEnvScope(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	staging := e.createKey("alpha", "staging", starflowtype.RoleWorker)
	stagingViewer := e.createKey("alpha", "staging", starflowtype.RoleViewer)
	ctx := starflow.WithScope(context.Background(), starflow.Scope{Workspace: "alpha", Env: "prod"})
	if _, err := e.eng.Apply(starflow.WithScope(context.Background(), starflow.Scope{Workspace: "alpha"}), "jobbed.yaml", []byte(`name: secretjob
steps:
  - id: work
    job: {type: prodonly, input: {customer: "${{ input.customer }}"}}
`)); err != nil {
		t.Fatal(err)
	}
	run, err := e.eng.Enqueue(ctx, "secretjob", map[string]any{"customer": "prod-customer-42"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Env != "prod" {
		t.Fatalf("run env %q", run.Env)
	}
	if a := e.call("GET", "/api/runs/"+run.ID, stagingViewer, nil); a.status != http.StatusNotFound && a.status != http.StatusForbidden {
		t.Fatalf("baseline: a staging viewer reads a prod run: %d", a.status)
	}
	a := e.call("POST", "/api/jobs/poll", staging, map[string]any{"types": []string{"prodonly"}, "worker": "ws", "wait_s": 5})
	if a.status == http.StatusOK {
		var j api.Job
		a.decode(t, &j)
		t.Fatalf("a worker key of env staging claimed the job of prod run %s: input %s", j.RunID, j.Input)
	}
}

// TestJobPollDuplicateTypes: a poll naming one type twice is answered on
// both stores (the types are deduplicated before record_job_poll, whose
// ON CONFLICT DO UPDATE would otherwise touch one row twice on
// PostgreSQL).
func TestJobPollDuplicateTypes(t *testing.T) {
	t.Parallel()
	for name, e := range map[string]*apiEnv{"sqlite": newAPIEnv(t, true, nil), "postgres": newAPIEnvPG(t)} {
		a := e.call("POST", "/api/jobs/poll", e.keys["alpha/worker"], map[string]any{"types": []string{"matrix", "matrix"}, "worker": "w1"})
		if a.status != http.StatusNoContent && a.status != http.StatusOK && a.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: poll with a duplicated type: %d %s", name, a.status, shortBody(a.body))
		}
	}
}
