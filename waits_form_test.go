package starflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

// TestApprovalFormRenderedWithoutNotify: an approval wait without a
// notify request stores its form rendered (expressions evaluated,
// secrets scrubbed) on the wait; a signal wait stores none.
func TestApprovalFormRenderedWithoutNotify(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Secrets: hookSecrets})
	h.start()
	h.apply(`name: sign-off
secrets: [HOOK_TOKEN]
steps:
  - id: review
    wait:
      approval:
        form:
          title: "${{ 'Ship order ' + input.order + '?' }}"
          fields:
            - {name: approved, type: boolean, label: Approve, required: true}
            - {name: note, type: string, label: "${{ 'token ' + secrets.HOOK_TOKEN }}"}
  - id: later
    wait: {signal: go}
`)
	run := h.enqueue("sign-off", map[string]any{"order": "o-9"})
	awaitParked(t, h, run.ID)
	ws := h.waits(run.ID)
	if len(ws) != 1 || ws[0].Kind != starflowtype.WaitApproval {
		t.Fatalf("waits: %+v, want one approval", ws)
	}
	var form struct {
		Title  string           `json:"title"`
		Fields []map[string]any `json:"fields"`
	}
	if err := json.Unmarshal(ws[0].Form, &form); err != nil {
		t.Fatalf("form %s: %v", ws[0].Form, err)
	}
	if form.Title != "Ship order o-9?" || len(form.Fields) != 2 || form.Fields[0]["required"] != true || form.Fields[0]["label"] != "Approve" {
		t.Errorf("form %s: want the title rendered and both fields", ws[0].Form)
	}
	if strings.Contains(string(ws[0].Form), "hook-secret-value") || form.Fields[1]["label"] != "token ***" {
		t.Errorf("form %s: the secret is not scrubbed", ws[0].Form)
	}
	if _, err := h.eng.Signal(t.Context(), run.ID, "review", json.RawMessage(`{"approved": true}`)); err != nil {
		t.Fatal(err)
	}
	awaitRun(t, h, run.ID, "parked at the signal", func(r *starflowtype.Run) bool {
		ws := h.waits(run.ID)
		return r.ClaimState == starflowtype.ClaimParked && len(ws) == 2
	})
	for _, w := range h.waits(run.ID) {
		if w.Kind == starflowtype.WaitSignal && w.Form != nil {
			t.Errorf("signal wait %s has form %s, want none", w.ID, w.Form)
		}
	}
}
