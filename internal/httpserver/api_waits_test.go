package httpserver

import (
	"encoding/json"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// TestWaitsShowTheRenderedForm: GET /api/runs/{id}/waits answers an
// approval wait with its form rendered (the title an expression of the
// input), token hash left out.
func TestWaitsShowTheRenderedForm(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	const src = `name: ship
steps:
  - id: approve
    wait:
      approval:
        form:
          title: "${{ 'Ship ' + string(input.qty) + ' boxes?' }}"
          fields:
            - {name: ok, type: boolean, label: Ship them, required: true}
`
	if a := e.call("PUT", "/api/workflows/ship", e.keys["alpha/admin"], src); a.status != 200 {
		t.Fatalf("apply: %d %s", a.status, shortBody(a.body))
	}
	r := e.enqueue("alpha", "ship", map[string]any{"qty": 3})
	e.waitFor(r.ID, "parked", func(r *starflowtype.Run) bool {
		// parked, not only paused: the run is paused (commit 1) before its
		// wait row is written (commit 3; internal/engine/waits.go).
		return r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked
	})
	a := e.call("GET", "/api/runs/"+r.ID+"/waits", e.keys["alpha/viewer"], nil)
	var list api.WaitList
	a.decode(t, &list)
	if a.status != 200 || len(list.Waits) != 1 {
		t.Fatalf("waits: %d %s", a.status, shortBody(a.body))
	}
	w := list.Waits[0]
	var form struct {
		Title  string           `json:"title"`
		Fields []map[string]any `json:"fields"`
	}
	if err := json.Unmarshal(w.Form, &form); err != nil {
		t.Fatalf("form %s: %v", w.Form, err)
	}
	if w.Kind != starflowtype.WaitApproval || w.Signal != "approve" || form.Title != "Ship 3 boxes?" ||
		len(form.Fields) != 1 || form.Fields[0]["required"] != true || w.TokenHash != "" {
		t.Errorf("wait %+v with form %s: want the approval with its title rendered", w, w.Form)
	}
}
