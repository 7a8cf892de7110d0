package storecore

import (
	"context"
	"errors"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// EnableWebhook implements state.Webhooks: one upsert that starts the
// webhook at generation 1 or moves it to the next generation.
func (s *Store) EnableWebhook(ctx context.Context, p *state.EnableWebhookParams) (*state.Webhook, error) {
	if err := checkWebhookName(p.WorkspaceID, p.WorkflowName); err != nil {
		return nil, s.errorf("enable webhook: %w", err)
	}
	if p.KeyID == "" {
		return nil, s.errorf("enable webhook of %s: %w", p.WorkflowName,
			starflowtype.Invalid(errors.New("the signing key's id is required")))
	}
	var out *state.Webhook
	_, err := s.write(ctx, state.OpEnableWebhook, "", false, func(t *txn) error {
		var err error
		out, err = scanWebhook(t.tx.QueryRow(ctx, "enable_webhook", p.WorkspaceID, p.WorkflowName, p.KeyID))
		return err
	})
	if err != nil {
		return nil, s.errorf("enable webhook of %s: %w", p.WorkflowName, err)
	}
	return out, nil
}

// GetWebhook implements state.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, p *state.GetWebhookParams) (*state.Webhook, error) {
	if err := checkWebhookName(p.WorkspaceID, p.WorkflowName); err != nil {
		return nil, s.errorf("get webhook: %w", err)
	}
	w, err := scanWebhook(s.reader().QueryRow(ctx, "get_webhook", p.WorkspaceID, p.WorkflowName))
	if isNoRows(err) {
		return nil, fmt.Errorf("webhook of workflow %s: %w", p.WorkflowName, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, s.errorf("get webhook of %s: %w", p.WorkflowName, err)
	}
	return w, nil
}

// DisableWebhook implements state.Webhooks.
func (s *Store) DisableWebhook(ctx context.Context, p *state.DisableWebhookParams) (*state.Webhook, error) {
	if err := checkWebhookName(p.WorkspaceID, p.WorkflowName); err != nil {
		return nil, s.errorf("disable webhook: %w", err)
	}
	notFound := fmt.Errorf("workflow %s has no enabled webhook: %w", p.WorkflowName, starflowtype.ErrNotFound)
	var out *state.Webhook
	_, err := s.write(ctx, state.OpDisableWebhook, "", false, func(t *txn) error {
		var err error
		out, err = scanWebhook(t.tx.QueryRow(ctx, "disable_webhook", p.WorkspaceID, p.WorkflowName))
		if isNoRows(err) {
			return notFound
		}
		return err
	})
	if errors.Is(err, starflowtype.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, s.errorf("disable webhook of %s: %w", p.WorkflowName, err)
	}
	return out, nil
}

// checkWebhookName refuses a webhook without its workspace or workflow.
func checkWebhookName(workspace, workflow string) error {
	switch {
	case workspace == "":
		return starflowtype.Invalid(fmt.Errorf("webhook of %q: the workspace is required", workflow))
	case workflow == "":
		return starflowtype.Invalid(errors.New("webhook: the workflow name is required"))
	}
	return nil
}

// scanWebhook reads a workflow_webhooks row (workspace_id, workflow_name,
// generation, key_id, enabled, created_at, updated_at).
func scanWebhook(row Row) (*state.Webhook, error) {
	var w state.Webhook
	if err := row.Scan(&w.WorkspaceID, &w.WorkflowName, &w.Generation, &w.KeyID, &w.Enabled, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	return &w, nil
}
