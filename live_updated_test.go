package starflow_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

// TestLiveRouteCurrentStepUpdatedAt (issue 10 item 14): GET
// /live/runs/{id} shows a running step among current_steps with
// updated_at set to its cold row's last write (database clock), not the
// zero time.
func TestLiveRouteCurrentStepUpdatedAt(t *testing.T) {
	h, _ := newWarmHarness(t, starflow.Config{})
	release, entered := make(chan struct{}), make(chan struct{})
	h.eng.RegisterStep("slow", func(ctx context.Context, req *step.Request) (any, error) {
		close(entered)
		select {
		case <-release:
			return "ok", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	h.start()
	defer close(release)
	handler, err := httpserver.New(httpserver.Config{Backend: h.eng, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	d := h.apply("name: live-at\nsteps:\n  - id: first\n    context_set: {x: 1}\n  - id: work\n    slow: {}\n")
	run, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	var cold *starflowtype.Step
	for _, s := range h.steps(run.ID) {
		if s.StepID == "work" {
			cold = s
		}
	}
	if cold == nil || cold.Status != starflowtype.StepRunning || cold.UpdatedAt.IsZero() {
		t.Fatalf("cold row of the running step: %+v; want running with updated_at", cold)
	}
	var view httpserver.LiveRunView
	eventually(t, "GET /live/runs/{id} to show step work running", func() bool {
		resp, err := http.Get(srv.URL + "/live/runs/" + run.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			return false
		}
		view = httpserver.LiveRunView{}
		if err := json.Unmarshal(body, &view); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return len(view.Run.CurrentSteps) == 1 && view.Run.CurrentSteps[0].StepID == "work"
	})
	got := view.Run.CurrentSteps[0]
	if !got.UpdatedAt.Equal(cold.UpdatedAt) {
		t.Errorf("current_steps[0].updated_at = %v, want the cold row's last write %v", got.UpdatedAt, cold.UpdatedAt)
	}
	if got.Status != "running" || got.Tries != 1 {
		t.Errorf("current step %+v: want running, tries 1", got)
	}
}
