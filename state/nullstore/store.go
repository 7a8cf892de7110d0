package nullstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Store is the no-op adapter. The zero value is ready to use and safe for
// concurrent use.
type Store struct{}

var _ state.Adapter = (*Store)(nil)

// New returns a Store.
func New() *Store { return &Store{} }

// Capabilities implements state.Adapter: not durable, not SQL.
func (*Store) Capabilities() state.Capabilities { return state.Capabilities{} }

// Migrate implements state.Adapter; there is no schema.
func (*Store) Migrate(context.Context) error { return nil }

// Close implements state.Adapter; there is nothing to release.
func (*Store) Close() error { return nil }

// PutDefinition implements state.Adapter. It returns the definition it
// would have stored, with a new id, and keeps nothing.
func (*Store) PutDefinition(_ context.Context, p *state.PutDefinitionParams) (*starflowtype.Definition, error) {
	return &starflowtype.Definition{
		ID:          uuid.NewString(),
		WorkspaceID: orDefault(p.WorkspaceID, state.DefaultWorkspace),
		Name:        p.Name,
		Revision:    p.Revision,
		Spec:        p.Spec,
		Source:      p.Source,
		CreatedAt:   now(),
	}, nil
}

// GetDefinition implements state.Adapter: always ErrNotFound.
func (*Store) GetDefinition(_ context.Context, p *state.GetDefinitionParams) (*starflowtype.Definition, error) {
	return nil, fmt.Errorf("nullstore: definition %s%s: %w", p.Name, p.ID, starflowtype.ErrNotFound)
}

// EnqueueRun implements state.Adapter. It returns the queued run it would
// have stored, defaults applied, and keeps nothing.
func (*Store) EnqueueRun(_ context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	id := p.ID
	if id == "" {
		id = uuid.NewString()
	}
	maxAttempts := p.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 3
	}
	mode := p.RecoveryMode
	if mode == "" {
		mode = starflowtype.RecoveryReplay
	}
	trigger := p.TriggerType
	if trigger == "" {
		trigger = starflowtype.TriggerAPI
	}
	t := now()
	return &starflowtype.Run{
		ID:               id,
		WorkspaceID:      orDefault(p.WorkspaceID, state.DefaultWorkspace),
		Env:              orDefault(p.Env, state.DefaultEnv),
		DefinitionID:     p.DefinitionID,
		WorkflowName:     p.WorkflowName,
		WorkflowRevision: p.WorkflowRevision,
		TemplateID:       p.WorkflowName,
		Status:           starflowtype.RunQueued,
		ClaimState:       starflowtype.ClaimQueued,
		RunnerPool:       p.RunnerPool,
		Priority:         p.Priority,
		Attempt:          1,
		MaxAttempts:      maxAttempts,
		AvailableAt:      t.Add(p.Delay),
		RecoveryMode:     mode,
		TriggerType:      trigger,
		ParentRunID:      p.ParentRunID,
		IdempotencyKey:   p.IdempotencyKey,
		Input:            p.Input,
		CreatedAt:        t,
		UpdatedAt:        t,
	}, nil
}

// ClaimRun implements state.Adapter: there is never a run to claim.
func (*Store) ClaimRun(context.Context, *state.ClaimRunParams) (*starflowtype.Run, error) {
	return nil, nil
}

// OnRunCancelled implements state.Adapter: the write is discarded.
func (*Store) OnRunCancelled(_ context.Context, p *state.RunCancelledParams) (*starflowtype.Run, error) {
	t := now()
	return &starflowtype.Run{ID: p.RunID, Status: starflowtype.RunCancelled, ClaimState: starflowtype.ClaimComplete,
		LeaseEpoch: p.Lease.Epoch, CompletedAt: t, UpdatedAt: t}, nil
}

// CancelRun implements state.Adapter: there is no run to cancel.
func (*Store) CancelRun(_ context.Context, p *state.CancelRunParams) (*starflowtype.Run, error) {
	return nil, fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrNotFound)
}

// RequeueRun implements state.Adapter: there is no run to requeue.
func (*Store) RequeueRun(_ context.Context, p *state.RequeueRunParams) (*starflowtype.Run, error) {
	return nil, fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrNotFound)
}

// ExpireOldLeases implements state.Adapter: no run holds a lease here.
func (*Store) ExpireOldLeases(context.Context, *state.ExpireOldLeasesParams) ([]*starflowtype.Run, error) {
	return nil, nil
}

// OnRunStart implements state.Adapter. It returns the run as the write
// describes it (running, leased by p.Lease) and keeps nothing.
func (*Store) OnRunStart(_ context.Context, p *state.RunStartParams) (*starflowtype.Run, error) {
	t := now()
	return &starflowtype.Run{
		ID: p.RunID, Status: starflowtype.RunRunning, ClaimState: starflowtype.ClaimRunning,
		LeasedBy: p.Lease.RunnerID, LeaseEpoch: p.Lease.Epoch, StartedAt: t, UpdatedAt: t,
	}, nil
}

// RefreshLease implements state.Adapter. It returns now + p.LeaseTTL (by
// the local clock) and keeps nothing.
func (*Store) RefreshLease(_ context.Context, p *state.RefreshLeaseParams) (time.Time, error) {
	return now().Add(p.LeaseTTL), nil
}

// OnNodeStart implements state.Adapter; the write is discarded.
func (*Store) OnNodeStart(context.Context, *state.NodeStartParams) error { return nil }

// OnNodeRetry implements state.Adapter; the write is discarded.
func (*Store) OnNodeRetry(context.Context, *state.NodeRetryParams) error { return nil }

// OnNodeComplete implements state.Adapter; the write is discarded.
func (*Store) OnNodeComplete(context.Context, *state.NodeCompleteParams) error { return nil }

// OnNodeError implements state.Adapter; the write is discarded.
func (*Store) OnNodeError(context.Context, *state.NodeErrorParams) error { return nil }

// OnNodeSkipped implements state.Adapter; the write is discarded.
func (*Store) OnNodeSkipped(context.Context, *state.NodeSkippedParams) error { return nil }

// RecordPhaseIfChanged implements state.Adapter; the write is discarded.
func (*Store) RecordPhaseIfChanged(context.Context, *state.RecordPhaseParams) error { return nil }

// OnRunComplete implements state.Adapter. It returns the run as the write
// describes it (succeeded, lease cleared) and keeps nothing.
func (*Store) OnRunComplete(_ context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	t := now()
	return &starflowtype.Run{
		ID: p.RunID, Status: starflowtype.RunSucceeded, ClaimState: starflowtype.ClaimComplete,
		LeaseEpoch: p.Lease.Epoch, Output: p.Output, CompletedAt: t, UpdatedAt: t,
	}, nil
}

// OnRunError implements state.Adapter. Without a stored run it knows no
// attempts or recovery mode, so it reports the run failed (not
// dead-lettered) whatever p.Retry says, and keeps nothing.
func (*Store) OnRunError(_ context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	t := now()
	return &starflowtype.Run{
		ID: p.RunID, Status: starflowtype.RunFailed, ClaimState: starflowtype.ClaimFailed,
		LeaseEpoch: p.Lease.Epoch, Error: p.Error, CompletedAt: t, UpdatedAt: t,
	}, nil
}

// ClearLease implements state.Adapter; the write is discarded.
func (*Store) ClearLease(context.Context, *state.ClearLeaseParams) error { return nil }

// GetRun implements state.Adapter: always ErrNotFound.
func (*Store) GetRun(_ context.Context, p *state.GetRunParams) (*starflowtype.Run, error) {
	return nil, fmt.Errorf("nullstore: run %s: %w", p.ID, starflowtype.ErrNotFound)
}

// ListRuns implements state.Adapter: always empty.
func (*Store) ListRuns(context.Context, *state.ListRunsParams) ([]*starflowtype.Run, error) {
	return nil, nil
}

// ListSteps implements state.Adapter: always empty.
func (*Store) ListSteps(context.Context, *state.ListStepsParams) ([]*starflowtype.Step, error) {
	return nil, nil
}

// ListEvents implements state.Adapter: always empty.
func (*Store) ListEvents(context.Context, *state.ListEventsParams) ([]*starflowtype.Event, error) {
	return nil, nil
}

// ListCheckpoints implements state.Adapter: always empty.
func (*Store) ListCheckpoints(context.Context, *state.ListCheckpointsParams) ([]*starflowtype.Checkpoint, error) {
	return nil, nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
