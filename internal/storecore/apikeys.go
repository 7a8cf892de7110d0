package storecore

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// CreateAPIKey implements state.Operator. The workspace, a valid role and
// a key hash of 64 lower-case hex digits (a sha256, never the key) are
// required; the workspace and the env (when given) must be valid names
// (starflowtype.ValidScopeName).
func (s *Store) CreateAPIKey(ctx context.Context, p *state.CreateAPIKeyParams) (*starflowtype.APIKey, error) {
	id, err := checkAPIKey(p)
	if err != nil {
		return nil, s.errorf("create api key: %w", err)
	}
	var out *starflowtype.APIKey
	_, err = s.write(ctx, state.OpCreateAPIKey, "", false, func(t *txn) error {
		var err error
		out, err = scanAPIKey(t.tx.QueryRow(ctx, "insert_api_key", id, p.WorkspaceID, p.Env, string(p.Role), p.KeyHash, p.Name))
		return err
	})
	if err != nil {
		return nil, s.errorf("create api key %s: %w", p.Name, err)
	}
	return out, nil
}

// checkAPIKey validates p and returns the key's id (generated when p has
// none).
func checkAPIKey(p *state.CreateAPIKeyParams) (string, error) {
	switch {
	case p.WorkspaceID == "":
		return "", starflowtype.Invalid(fmt.Errorf("api key %q: the workspace is required", p.Name))
	case !starflowtype.ValidScopeName(p.WorkspaceID):
		return "", fmt.Errorf("api key %q: %w", p.Name, starflowtype.CheckScopeName("workspace", p.WorkspaceID))
	case p.Env != "" && !starflowtype.ValidScopeName(p.Env):
		return "", fmt.Errorf("api key %q: %w", p.Name, starflowtype.CheckScopeName("env", p.Env))
	case !p.Role.Valid():
		return "", starflowtype.Invalid(fmt.Errorf("api key %q: role %q is not viewer, operator, admin or worker", p.Name, p.Role))
	case len(p.KeyHash) != 64 || strings.Trim(p.KeyHash, "0123456789abcdef") != "":
		return "", starflowtype.Invalid(fmt.Errorf("api key %q: the key hash must be 64 lower-case hex digits (the sha256 of the key, never the key)", p.Name))
	}
	if p.ID == "" {
		return uuid.NewString(), nil
	}
	id, err := checkID("api key id", p.ID)
	return id, starflowtype.Invalid(err)
}

// ListAPIKeys implements state.Operator.
func (s *Store) ListAPIKeys(ctx context.Context, p *state.ListAPIKeysParams) ([]*starflowtype.APIKey, error) {
	rows, err := s.reader().Query(ctx, "list_api_keys", p.WorkspaceID, p.IncludeRevoked)
	if err != nil {
		return nil, s.errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, s.errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey implements state.Operator.
func (s *Store) RevokeAPIKey(ctx context.Context, p *state.RevokeAPIKeyParams) (*starflowtype.APIKey, error) {
	notFound := fmt.Errorf("api key %s: %w", p.ID, starflowtype.ErrNotFound)
	id, ok := CanonicalID(p.ID)
	if !ok {
		return nil, notFound
	}
	var out *starflowtype.APIKey
	_, err := s.write(ctx, state.OpRevokeAPIKey, "", false, func(t *txn) error {
		var err error
		out, err = scanAPIKey(t.tx.QueryRow(ctx, "revoke_api_key", id, p.WorkspaceID))
		if isNoRows(err) {
			return notFound
		}
		return err
	})
	if err != nil {
		return nil, s.errorf("revoke api key: %w", err)
	}
	return out, nil
}

// APIKeyByHash implements state.Operator.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (*starflowtype.APIKey, error) {
	k, err := scanAPIKey(s.reader().QueryRow(ctx, "api_key_by_hash", strings.ToLower(hash)))
	if isNoRows(err) {
		return nil, fmt.Errorf("api key: no key has that hash: %w", starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, s.errorf("api key by hash: %w", err)
	}
	return k, nil
}

// APIKeysConfigured implements state.Operator.
func (s *Store) APIKeysConfigured(ctx context.Context) (bool, error) {
	var configured bool
	if err := s.reader().QueryRow(ctx, "api_keys_configured").Scan(&configured); err != nil {
		return false, s.errorf("api keys configured: %w", err)
	}
	return configured, nil
}

// scanAPIKey reads an api_keys row without its hash (id, workspace_id,
// env, role, name, created_at, revoked_at).
func scanAPIKey(row Row) (*starflowtype.APIKey, error) {
	var k starflowtype.APIKey
	var role string
	if err := row.Scan(&k.ID, &k.WorkspaceID, &k.Env, &role, &k.Name, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	k.Role = starflowtype.Role(role)
	return &k, nil
}
