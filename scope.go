package starflow

import (
	"context"
)

// Scope names the workspace and env an operation acts in (seed 000's
// workspace_id and env). A zero field is the engine's: Config.Workspace
// and Config.Env.
type Scope struct {
	Workspace string
	Env       string
}

type scopeKey struct{}

// WithScope returns a context whose operations act in sc: Apply, Plan and
// Enqueue write into its workspace (and env), and Resume, Retrigger,
// Cancel, Signal and SignalKey find only runs of its workspace (another
// workspace's run is ErrNotFound). A server sets it once per request from
// the caller's credentials, so no operation of that request can reach
// another workspace. Without it, operations act in Config.Workspace.
func WithScope(ctx context.Context, sc Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// ScopeOf is the scope WithScope put in ctx, its zero fields filled from
// the engine's Config.
func (e *Engine) ScopeOf(ctx context.Context) Scope {
	sc, _ := ctx.Value(scopeKey{}).(Scope)
	if sc.Workspace == "" {
		sc.Workspace = e.cfg.Workspace
	}
	if sc.Env == "" {
		sc.Env = e.cfg.Env
	}
	return sc
}

// workspace is the workspace of ctx's operations.
func (e *Engine) workspace(ctx context.Context) string { return e.ScopeOf(ctx).Workspace }
