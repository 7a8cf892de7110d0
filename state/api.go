package state

import (
	"context"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Operator is what the HTTP API reads and writes besides running
// workflows: API keys, definition listings, run lookups by id prefix,
// and session variables written by an operator rather than a run.
// Every Adapter implements it.
type Operator interface {
	// CreateAPIKey inserts an api_keys row. The caller generates the key
	// and passes only its hash (sha256 hex of the whole key text).
	// ErrConflict when the id or the hash already exists.
	CreateAPIKey(ctx context.Context, p *CreateAPIKeyParams) (*starflowtype.APIKey, error)
	// ListAPIKeys lists keys, oldest first, revoked ones included only
	// when p.IncludeRevoked.
	ListAPIKeys(ctx context.Context, p *ListAPIKeysParams) ([]*starflowtype.APIKey, error)
	// RevokeAPIKey sets revoked_at (the database's now) on an unrevoked
	// key and returns it; a key already revoked is returned unchanged.
	// ErrNotFound when no key has that id (in p.WorkspaceID, when set).
	RevokeAPIKey(ctx context.Context, p *RevokeAPIKeyParams) (*starflowtype.APIKey, error)
	// APIKeyByHash finds the key whose key_hash is hash, revoked or not
	// (the caller refuses revoked ones). ErrNotFound when none.
	APIKeyByHash(ctx context.Context, hash string) (*starflowtype.APIKey, error)
	// APIKeysConfigured reports whether api_keys holds any row, revoked
	// ones included: once a key was ever created, the API needs one.
	APIKeysConfigured(ctx context.Context) (bool, error)

	// ListDefinitions lists the workflows of a workspace, one row each:
	// its current revision (the most recently applied), by name.
	ListDefinitions(ctx context.Context, p *ListDefinitionsParams) ([]*starflowtype.Definition, error)
	// ListRevisions lists every revision of one workflow, the most
	// recently applied first (empty when the name was never applied).
	ListRevisions(ctx context.Context, p *ListRevisionsParams) ([]*starflowtype.Definition, error)

	// FindRunIDs lists up to p.Limit (default 2) ids of runs in
	// p.WorkspaceID ("" = any) starting with p.Prefix (hex digits and
	// hyphens, compared without regard to case), in id order: an id
	// prefix is unique when one comes back. The lookup is a range scan
	// of the primary key, never a table scan.
	FindRunIDs(ctx context.Context, p *FindRunIDsParams) ([]string, error)

	// SessionList lists a session's variables by key, expired ones
	// (keep_until in the past) left out.
	SessionList(ctx context.Context, p *SessionListParams) ([]*starflowtype.SessionVar, error)
	// SessionDelete removes one variable. ErrNotFound when absent.
	SessionDelete(ctx context.Context, p *SessionDeleteParams) error

	// RecentRecoveries lists the newest recovery events
	// (starflowtype.RecoveryEventTypes) of a workspace's runs, newest
	// first, each with its run's env and workflow. It reads a partial
	// index of those events in id order, so its cost does not grow with
	// the events table.
	RecentRecoveries(ctx context.Context, p *RecentRecoveriesParams) ([]*starflowtype.RecoveryEvent, error)
}

// RecentRecoveriesParams selects recovery events.
type RecentRecoveriesParams struct {
	WorkspaceID string // required: "" matches nothing
	Env         string // only this env's runs; "" = every env
	// Limit is how many at most: default RecentRecoveriesLimitDefault
	// (50), at most RecentRecoveriesLimitMax (500).
	Limit int
}

// Bounds of RecentRecoveriesParams.Limit.
const (
	RecentRecoveriesLimitDefault = 50
	RecentRecoveriesLimitMax     = 500
)

// CreateAPIKeyParams inserts one API key.
type CreateAPIKeyParams struct {
	ID          string // uuid; generated when empty
	WorkspaceID string // required
	Env         string // "" = every env of the workspace
	Role        starflowtype.Role
	Name        string
	KeyHash     string // sha256 hex of the key text
}

// ListAPIKeysParams filters a key listing.
type ListAPIKeysParams struct {
	WorkspaceID    string // "" = any
	IncludeRevoked bool
}

// RevokeAPIKeyParams names the key to revoke.
type RevokeAPIKeyParams struct {
	ID          string
	WorkspaceID string // "" = any
}

// ListDefinitionsParams lists a workspace's workflows.
type ListDefinitionsParams struct {
	WorkspaceID string // "" = DefaultWorkspace
}

// ListRevisionsParams lists one workflow's revisions.
type ListRevisionsParams struct {
	WorkspaceID string // "" = DefaultWorkspace
	Name        string
}

// FindRunIDsParams looks runs up by id prefix.
type FindRunIDsParams struct {
	WorkspaceID string // "" = any
	Prefix      string
	Limit       int // default 2
}

// SessionListParams lists one session's variables.
type SessionListParams struct {
	WorkspaceID string
	SessionID   string
}

// SessionDeleteParams removes one session variable.
type SessionDeleteParams struct {
	WorkspaceID string
	SessionID   string
	Key         string
}

// RunCursor is a position in a run listing (ListRunsParams.After): the
// created_at and id of the last run of the previous page. Listings are
// ordered by (created_at, id) descending, so a cursor stays valid while
// runs are inserted (keyset pagination).
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}
