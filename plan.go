package starflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Plan is the deploy impact of a new revision of a workflow (`starflow
// plan FILE`): which in-flight runs could move onto it and which could not.
type Plan struct {
	Workflow        string `json:"workflow"`
	NewRevision     string `json:"new_revision"`
	CurrentRevision string `json:"current_revision,omitempty"` // "" when the workflow was never applied
	// Changed is false when the file is exactly the current revision.
	Changed bool `json:"changed"`
	// Movable runs could be resumed onto the new revision: every step they
	// completed exists there with the same kind.
	Movable []PlanRun `json:"movable"`
	// Blocked runs could not, with the reason.
	Blocked []PlanRun `json:"blocked"`
}

// PlanRun is one in-flight run in a Plan.
type PlanRun struct {
	RunID    string                 `json:"run_id"`
	Status   starflowtype.RunStatus `json:"status"`
	Revision string                 `json:"revision"`
	Reason   string                 `json:"reason,omitempty"`
}

// planLimit bounds the in-flight runs a plan examines.
const planLimit = 10000

// Plan compares a definition (not yet applied) with the stored revisions
// and lists the in-flight runs (running, paused, interrupted) that could
// move onto it and those that could not, with the reason per run. It
// writes nothing. Errors: the definition's validation errors, store errors.
func (e *Engine) Plan(ctx context.Context, filename string, src []byte) (*Plan, error) {
	def, err := e.Parse(filename, src)
	if err != nil {
		return nil, err
	}
	p := &Plan{Workflow: def.Name, NewRevision: def.Revision(), Movable: []PlanRun{}, Blocked: []PlanRun{}}
	cur, err := e.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: e.workspace(ctx), Name: def.Name})
	switch {
	case errors.Is(err, starflowtype.ErrNotFound):
		p.Changed = true
		return p, nil
	case err != nil:
		return nil, err
	}
	p.CurrentRevision = cur.Revision
	p.Changed = cur.Revision != p.NewRevision
	runs, err := e.store.ListRuns(ctx, &state.ListRunsParams{WorkspaceID: e.workspace(ctx), WorkflowName: def.Name, Limit: planLimit,
		Status: []starflowtype.RunStatus{starflowtype.RunRunning, starflowtype.RunPaused, starflowtype.RunInterrupted}})
	if err != nil {
		return nil, err
	}
	target := &starflowtype.Definition{Name: def.Name, Revision: p.NewRevision, Spec: def.Canonical()}
	for _, r := range runs {
		pr := PlanRun{RunID: r.ID, Status: r.Status, Revision: r.WorkflowRevision}
		if r.WorkflowRevision == p.NewRevision {
			p.Movable = append(p.Movable, pr)
			continue
		}
		cps, err := e.store.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: r.ID})
		if err != nil {
			return nil, err
		}
		if err := e.compatible(ctx, r, cps, target); err != nil {
			if !errors.Is(err, starflowtype.ErrRevisionMismatch) {
				return nil, err
			}
			pr.Reason = fmt.Sprint(err)
			p.Blocked = append(p.Blocked, pr)
			continue
		}
		p.Movable = append(p.Movable, pr)
	}
	return p, nil
}
