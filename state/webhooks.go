package state

import (
	"context"
	"time"
)

// Webhooks keeps which workflows take webhook deliveries (POST
// /api/workflows/{name}/trigger) and under which generation of their
// secret. It never holds a secret: a webhook's secret is derived from
// the server's wake-token signing key named by KeyID and the row's
// (workspace, workflow, generation) (internal/webhook), so a table read
// with the data signs nothing. Every Adapter implements it.
type Webhooks interface {
	// EnableWebhook turns the workflow's webhook on under a new
	// generation: 1 for a workflow that never had one, the stored
	// generation + 1 otherwise (a rotation, or enabling again after a
	// disable), so a secret of an earlier generation never verifies
	// again. KeyID is stored as the key the new secret derives from.
	// The caller checks that the workflow exists.
	EnableWebhook(ctx context.Context, p *EnableWebhookParams) (*Webhook, error)
	// GetWebhook reads a workflow's webhook row, enabled or not.
	// ErrNotFound when the workflow never had one.
	GetWebhook(ctx context.Context, p *GetWebhookParams) (*Webhook, error)
	// DisableWebhook turns an enabled webhook off (its generation is
	// kept, so enabling it again moves to a new one) and returns the row.
	// ErrNotFound when the workflow has no enabled webhook.
	DisableWebhook(ctx context.Context, p *DisableWebhookParams) (*Webhook, error)
}

// Webhook is a workflow_webhooks row.
type Webhook struct {
	WorkspaceID  string
	WorkflowName string
	// Generation counts the secrets the webhook had, from 1.
	Generation int64
	// KeyID is the id of the wake-token key the current generation's
	// secret derives from.
	KeyID     string
	Enabled   bool
	CreatedAt time.Time // the first enable
	UpdatedAt time.Time // the last enable or disable
}

// EnableWebhookParams enables (or rotates) one workflow's webhook.
type EnableWebhookParams struct {
	WorkspaceID  string // required
	WorkflowName string // required
	KeyID        string // required: the current wake-token signing key's id
}

// GetWebhookParams names one workflow's webhook.
type GetWebhookParams struct {
	WorkspaceID  string // required
	WorkflowName string // required
}

// DisableWebhookParams names the webhook to disable.
type DisableWebhookParams struct {
	WorkspaceID  string // required
	WorkflowName string // required
}

// The webhook writes, as hooks see them (Change.Op).
const (
	OpEnableWebhook  Op = "EnableWebhook"
	OpDisableWebhook Op = "DisableWebhook"
)
