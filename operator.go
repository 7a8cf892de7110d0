package starflow

import (
	"context"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Revision choices of a resume.
const (
	RevisionPinned  = "pinned"  // the revision the run started on (default)
	RevisionCurrent = "current" // the newest applied revision of the workflow
)

// ResumeOptions configure Resume.
type ResumeOptions struct {
	// Mode is the recovery mode of the new attempt: RecoveryResume
	// (default: committed steps are restored, not executed) or
	// RecoveryReplay (from the first step).
	Mode starflowtype.RecoveryMode
	// Revision is RevisionPinned (default) or RevisionCurrent.
	Revision string
}

// Resume is an operator's resume of a run that stopped (interrupted,
// failed or cancelled): a new attempt is queued. Errors:
// starflowtype.ErrNoCheckpoint (resume mode, and no step ever committed),
// starflowtype.ErrRevisionMismatch (onto the current revision, and a
// completed step is missing there or changed kind), ErrConflict (the run
// is queued, running, paused or succeeded), ErrNotFound.
func (e *Engine) Resume(ctx context.Context, runID string, opts *ResumeOptions) (*starflowtype.Run, error) {
	if opts == nil {
		opts = &ResumeOptions{}
	}
	mode := opts.Mode
	if mode == "" {
		mode = starflowtype.RecoveryResume
	}
	if mode != starflowtype.RecoveryResume && mode != starflowtype.RecoveryReplay {
		return nil, starflowtype.Invalid(fmt.Errorf("resume mode %q: must be resume or replay", mode))
	}
	run, err := e.store.GetRun(ctx, &state.GetRunParams{WorkspaceID: e.workspace(ctx), ID: runID})
	if err != nil {
		return nil, err
	}
	cps, err := e.store.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: run.ID})
	if err != nil {
		return nil, err
	}
	if mode == starflowtype.RecoveryResume && len(cps) == 0 {
		return nil, fmt.Errorf("run %s has no checkpoint to resume from: no step of it committed: %w", run.ID, starflowtype.ErrNoCheckpoint)
	}
	p := &state.RequeueRunParams{WorkspaceID: e.workspace(ctx), RunID: run.ID, Reason: "resume", RecoveryMode: mode}
	switch opts.Revision {
	case "", RevisionPinned:
	case RevisionCurrent:
		row, err := e.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: e.workspace(ctx), Name: run.WorkflowName})
		if err != nil {
			return nil, fmt.Errorf("workflow %q: %w", run.WorkflowName, err)
		}
		if row.Revision != run.WorkflowRevision {
			if err := e.compatible(ctx, run, cps, row); err != nil {
				return nil, fmt.Errorf("run %s: %w", run.ID, err)
			}
			p.DefinitionID, p.WorkflowRevision = row.ID, row.Revision
		}
	default:
		return nil, starflowtype.Invalid(fmt.Errorf("resume revision %q: must be pinned or current", opts.Revision))
	}
	r, err := e.store.RequeueRun(ctx, p)
	if err != nil {
		return nil, err
	}
	e.runner.Notify()
	return r, nil
}

// compatible checks that every step the run completed exists in the
// target revision with the same kind (SPEC §3).
func (e *Engine) compatible(ctx context.Context, run *starflowtype.Run, cps []*starflowtype.Checkpoint, target *starflowtype.Definition) error {
	def, err := e.engine.Definition(target)
	if err != nil {
		return fmt.Errorf("stored workflow %q: %w", target.Name, err)
	}
	steps, err := e.store.ListSteps(ctx, &state.ListStepsParams{RunID: run.ID})
	if err != nil {
		return err
	}
	kinds := map[string]string{}
	for _, s := range steps {
		kinds[s.StepID] = s.Kind
	}
	for _, c := range cps {
		s := def.StepByID(c.StepID)
		switch {
		case s == nil:
			return fmt.Errorf("completed step %q is missing from revision %s: %w", c.StepID, shortRev(target.Revision), starflowtype.ErrRevisionMismatch)
		case kinds[c.StepID] != "" && kinds[c.StepID] != s.Kind():
			return fmt.Errorf("completed step %q ran as %s; revision %s makes it %s: %w", c.StepID, kinds[c.StepID], shortRev(target.Revision), s.Kind(), starflowtype.ErrRevisionMismatch)
		}
	}
	return nil
}

// Retrigger is an operator's replay of a run that stopped (or ended): a
// new attempt from the first step, in replay mode. Errors: ErrConflict
// (queued, running or paused), ErrNotFound.
func (e *Engine) Retrigger(ctx context.Context, runID string) (*starflowtype.Run, error) {
	r, err := e.store.RequeueRun(ctx, &state.RequeueRunParams{WorkspaceID: e.workspace(ctx), RunID: runID,
		Reason: "retrigger", RecoveryMode: starflowtype.RecoveryReplay})
	if err != nil {
		return nil, err
	}
	e.runner.Notify()
	return r, nil
}

// Cancel is an operator's cancel: a run that is not executing is cancelled
// at once; a running run stops at its next step boundary (the step in
// flight finishes) and is then marked cancelled. Errors: ErrConflict (the
// run already ended), ErrNotFound.
func (e *Engine) Cancel(ctx context.Context, runID string) (*starflowtype.Run, error) {
	return e.countCancel(e.store.CancelRun(ctx, &state.CancelRunParams{WorkspaceID: e.workspace(ctx), RunID: runID}))
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
