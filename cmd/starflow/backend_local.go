package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// localBackend acts on the store named by --store, --db, STARFLOW_STORE
// or STARFLOW_DB, through an engine without a runner. The store and the
// engine are opened on first use.
type localBackend struct {
	g             *globalFlags
	opts          backendOptions
	keys, keyFile string // wake keys (opts.wakeKeys)
	st            state.Adapter
	eng           *starflow.Engine
}

func (l *localBackend) where() string { return "in this store" }
func (l *localBackend) arg() string   { return l.g.storeArg() }

func (l *localBackend) open(ctx context.Context) error {
	_, err := l.store(ctx)
	return err
}

func (l *localBackend) close() {
	if l.st != nil {
		l.st.Close()
	}
}

// store opens the store (once).
func (l *localBackend) store(ctx context.Context) (state.Adapter, error) {
	if l.st != nil {
		return l.st, nil
	}
	open := l.g.openExistingStore
	if l.opts.create {
		open = l.g.openStore
	}
	st, err := open(ctx)
	if err != nil {
		return nil, err
	}
	l.st = st
	return st, nil
}

// engine builds the engine over the store (once): no runner, the
// command's limits and, for signal and wake, its wake keys.
func (l *localBackend) engine(ctx context.Context) (*starflow.Engine, error) {
	if l.eng != nil {
		return l.eng, nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	eng, err := starflow.New(starflow.Config{Store: st, Logger: l.g.logger(os.Stderr), NoRunner: true,
		Limits: l.opts.limits, WakeKeys: l.keys, WakeKeyFile: l.keyFile})
	if err != nil {
		return nil, err
	}
	l.eng = eng
	return eng, nil
}

func (l *localBackend) validate(_ context.Context, path string, src []byte) (*workflow.Definition, error) {
	def, err := workflow.Parse(path, src, workflow.ParseOptions{Limits: l.opts.limits})
	if err != nil {
		return nil, err
	}
	if err := starflow.Supported(path, def); err != nil {
		return nil, err
	}
	return def, nil
}

func (l *localBackend) apply(ctx context.Context, path string, src []byte) (*starflowtype.Definition, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Apply(ctx, path, src)
}

func (l *localBackend) plan(ctx context.Context, path string, src []byte) (*starflow.Plan, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Plan(ctx, path, src)
}

func (l *localBackend) enqueue(ctx context.Context, name string, input json.RawMessage, o *starflow.EnqueueOptions) (*starflowtype.Run, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	o.Trigger = starflowtype.TriggerCLI
	return eng.Enqueue(ctx, name, input, o)
}

func (l *localBackend) listRuns(ctx context.Context, p *state.ListRunsParams) ([]*api.RunView, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	runs, err := eng.Store().ListRuns(ctx, p)
	if err != nil {
		return nil, err
	}
	stuck, err := eng.StuckMany(ctx, runs)
	if err != nil {
		return nil, err
	}
	out := make([]*api.RunView, len(runs))
	for i, r := range runs {
		out[i] = api.NewRunView(r, stuck[r.ID])
	}
	return out, nil
}

func (l *localBackend) stuck(ctx context.Context, r *starflowtype.Run) (*starflowtype.Stuck, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Stuck(ctx, r)
}

// run finds a run by id, or by a prefix of its id (state.Adapter
// FindRunIDs: unique, or refused naming two candidates).
func (l *localBackend) run(ctx context.Context, ref string) (*starflowtype.Run, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	id := ref
	if len(ref) != 36 {
		ids, err := st.FindRunIDs(ctx, &state.FindRunIDsParams{Prefix: ref, Limit: 2})
		switch {
		case err != nil:
			return nil, err
		case len(ids) == 0:
			return nil, starflowtype.ErrNotFound
		case len(ids) > 1:
			return nil, ambiguousPrefix(ref, ids)
		}
		id = ids[0]
	}
	return st.GetRun(ctx, &state.GetRunParams{ID: id})
}

func (l *localBackend) steps(ctx context.Context, runID string, attempt int) ([]*starflowtype.Step, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.ListSteps(ctx, &state.ListStepsParams{RunID: runID, Attempt: attempt})
}

func (l *localBackend) checkpoints(ctx context.Context, runID string, attempt int) ([]*starflowtype.Checkpoint, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: runID, Attempt: attempt})
}

func (l *localBackend) events(ctx context.Context, runID string, after int64) ([]*starflowtype.Event, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.ListEvents(ctx, &state.ListEventsParams{RunID: runID, AfterID: after})
}

func (l *localBackend) waits(ctx context.Context, runID string, limit int, pending bool) ([]*starflowtype.Wait, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	p := &state.ListWaitsParams{RunID: runID, Limit: limit}
	if pending {
		p.Status = []starflowtype.WaitStatus{starflowtype.WaitPending}
	}
	ws, err := st.ListWaits(ctx, p)
	for _, w := range ws {
		w.TokenHash = "" // as the API answers: nothing a reader needs
	}
	return ws, err
}

func (l *localBackend) definition(ctx context.Context, r *starflowtype.Run) (*starflowtype.Definition, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	if r.DefinitionID == "" {
		return nil, starflowtype.ErrNotFound
	}
	return st.GetDefinition(ctx, &state.GetDefinitionParams{ID: r.DefinitionID})
}

func (l *localBackend) resume(ctx context.Context, runID string, o *starflow.ResumeOptions) (*starflowtype.Run, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Resume(ctx, runID, o)
}

func (l *localBackend) retrigger(ctx context.Context, runID string) (*starflowtype.Run, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Retrigger(ctx, runID)
}

func (l *localBackend) cancel(ctx context.Context, runID string) (*starflowtype.Run, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Cancel(ctx, runID)
}

func (l *localBackend) signal(ctx context.Context, runID, name string, payload json.RawMessage) (*state.SignalResult, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Signal(ctx, runID, name, payload)
}

func (l *localBackend) signalKey(ctx context.Context, name, key string, payload json.RawMessage) (*state.SignalResult, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.SignalKey(ctx, name, key, payload)
}

func (l *localBackend) wake(ctx context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	return eng.Wake(ctx, token, payload)
}

func (l *localBackend) createKey(ctx context.Context, p *keyParams) (*starflowtype.APIKey, string, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, "", err
	}
	secret, hash := apikey.New()
	k, err := st.CreateAPIKey(ctx, &state.CreateAPIKeyParams{WorkspaceID: p.Workspace, Env: p.Env, Role: p.Role, Name: p.Name, KeyHash: hash})
	if err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

func (l *localBackend) listKeys(ctx context.Context, workspace string) ([]*starflowtype.APIKey, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.ListAPIKeys(ctx, &state.ListAPIKeysParams{WorkspaceID: workspace, IncludeRevoked: true})
}

func (l *localBackend) revokeKey(ctx context.Context, id string) (*starflowtype.APIKey, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.RevokeAPIKey(ctx, &state.RevokeAPIKeyParams{ID: id})
}
