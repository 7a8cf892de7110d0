package starflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/internal/webhook"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Webhook triggers (issue 15): a workflow whose webhook an admin enabled
// takes runs from senders that cannot hold an API key — POST
// /api/workflows/{name}/trigger with the body signed by the workflow's
// secret (internal/webhook). The secret is never stored: it is derived
// from the key ring's signing key and (workspace, workflow, generation),
// and the store keeps only the generation and the key's id.

// Webhook is a workflow's webhook trigger as an admin sees it: which
// generation of its secret is current, the key it derives from, and the
// secret itself (the text the sender signs with).
type Webhook struct {
	// Workspace and Workflow name the webhook.
	Workspace string
	Workflow  string
	// Generation counts the secrets the webhook had, from 1; every
	// enable (a rotation, or enabling again after a disable) moves to the
	// next, and the secrets of earlier generations stop verifying.
	Generation int64
	// KeyID is the wake-token key the secret derives from.
	KeyID string
	// Enabled is false only in DisableWebhook's answer.
	Enabled bool
	// Secret is "sfwh_" and 64 hex digits; "" in DisableWebhook's answer.
	Secret string
	// CreatedAt is the first enable, UpdatedAt the last enable or disable
	// (database clock).
	CreatedAt time.Time
	UpdatedAt time.Time
}

// WebhookDelivery is one request to a workflow's trigger, as received.
type WebhookDelivery struct {
	// Workflow is the workflow the request names.
	Workflow string
	// Body is the raw request body: the signed bytes, and the run's
	// input once the signature checks out (a JSON object).
	Body []byte
	// Signature is the signature header's value, "sha256=<hex>"
	// (X-Starflow-Signature-256 or GitHub's X-Hub-Signature-256).
	Signature string
	// DeliveryID is the sender's id of the delivery (X-Starflow-Delivery
	// or X-GitHub-Delivery), "" when it sent none. A redelivery with the
	// same id starts no second run: it answers the first.
	DeliveryID string
}

// WebhookTriggered is what a verified delivery did: the run it enqueued,
// or the run an earlier delivery with the same id enqueued (Created
// false).
type WebhookTriggered struct {
	Run     *starflowtype.Run
	Created bool
}

// ErrWebhookUnauthorized is TriggerWebhook's refusal of a delivery that
// does not prove it knows the workflow's current secret: no signature,
// a malformed or wrong one, one of an earlier generation, a workflow
// without an enabled webhook, or one that does not exist. The cases are
// not told apart (nor timed apart: the body's MAC is computed in every
// one), so a caller without the secret learns nothing about which
// workflows exist or take webhooks. Nothing is written.
var ErrWebhookUnauthorized = errors.New("webhook delivery refused: the signature is missing or wrong, or this workflow takes no webhooks; nothing was enqueued")

// WebhookDeliveryIDMax is the longest delivery id TriggerWebhook takes
// (bytes); GitHub's are 36.
const WebhookDeliveryIDMax = 200

// webhookKeyPrefix starts the idempotency key of a delivery id (receipts
// are per workspace; the workflow's name keeps two workflows' ids apart).
const webhookKeyPrefix = "webhook:"

// EnableWebhook turns the workflow's webhook on in ctx's workspace and
// returns it with its secret: a new generation every call — the first
// enable, a rotation (the previous secret stops verifying at once), or
// enabling again after DisableWebhook. The secret derives from the key
// ring's current signing key. Errors: ErrNotFound (no such workflow),
// starflowtype.ErrNoWakeKeys and the key ring's other errors, store
// errors.
func (e *Engine) EnableWebhook(ctx context.Context, workflow string) (*Webhook, error) {
	ws := e.workspace(ctx)
	if _, err := e.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: ws, Name: workflow}); err != nil {
		return nil, fmt.Errorf("workflow %q: %w", workflow, err)
	}
	key, err := e.engine.SigningKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("enable webhook of %s: %w", workflow, err)
	}
	row, err := e.store.EnableWebhook(ctx, &state.EnableWebhookParams{WorkspaceID: ws, WorkflowName: workflow, KeyID: key.ID})
	if err != nil {
		return nil, err
	}
	return webhookOf(row, webhook.Secret(key.Secret, ws, workflow, row.Generation)), nil
}

// Webhook reads the workflow's enabled webhook in ctx's workspace, its
// secret derived again. Errors: ErrNotFound (no such workflow, or no
// enabled webhook), starflowtype.ErrConflict when the key the secret
// derives from has left the key ring (deliveries are refused until
// EnableWebhook rotates onto the current key), store errors.
func (e *Engine) Webhook(ctx context.Context, workflow string) (*Webhook, error) {
	ws := e.workspace(ctx)
	row, err := e.store.GetWebhook(ctx, &state.GetWebhookParams{WorkspaceID: ws, WorkflowName: workflow})
	if err != nil {
		return nil, err
	}
	if !row.Enabled {
		return nil, fmt.Errorf("workflow %s has no enabled webhook (it was disabled): %w", workflow, starflowtype.ErrNotFound)
	}
	key, err := e.engine.KeyByID(ctx, row.KeyID)
	if err != nil {
		return nil, fmt.Errorf("the webhook of workflow %s signs with wake key %q, which the key ring no longer holds, so every delivery is refused; enable it again to rotate onto the current key: %w",
			workflow, row.KeyID, starflowtype.ErrConflict)
	}
	return webhookOf(row, webhook.Secret(key.Secret, ws, workflow, row.Generation)), nil
}

// DisableWebhook turns the workflow's webhook off in ctx's workspace:
// deliveries are refused at once (as for a workflow that never had one),
// and enabling it again gives a new secret. Errors: ErrNotFound (no
// enabled webhook), store errors.
func (e *Engine) DisableWebhook(ctx context.Context, workflow string) (*Webhook, error) {
	row, err := e.store.DisableWebhook(ctx, &state.DisableWebhookParams{WorkspaceID: e.workspace(ctx), WorkflowName: workflow})
	if err != nil {
		return nil, err
	}
	return webhookOf(row, ""), nil
}

// TriggerWebhook enqueues a run of d.Workflow in ctx's workspace (and
// env) with d.Body as its input, once d.Signature proves the sender holds
// the workflow's current secret. The run's trigger_type is api, and its
// run_queued event says {"webhook": {"generation": N, "delivery": ID}}.
// Errors: ErrWebhookUnauthorized (checked first: nothing else is looked
// at before the signature); then starflowtype.ErrInvalid (a delivery id
// over WebhookDeliveryIDMax bytes or holding control characters; a body
// that is not a JSON object, or that the workflow's input_schema
// refuses, after its defaults are filled in as for any enqueue; an
// empty body too: send {} for no input), a
// *workflow.LimitError (over Config.Limits.InputBytes),
// starflowtype.ErrConflict (the delivery id was used for another
// workflow's run), store errors.
func (e *Engine) TriggerWebhook(ctx context.Context, d *WebhookDelivery) (*WebhookTriggered, error) {
	row, err := e.verifyWebhook(ctx, d)
	if err != nil {
		return nil, err
	}
	if err := checkDeliveryID(d.DeliveryID); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(d.Body)) == 0 {
		return nil, starflowtype.Invalid(errors.New("the body is empty: a delivery's body is a JSON object, the run's input (send {} for none)"))
	}
	queued := map[string]any{"generation": row.Generation}
	opts := &EnqueueOptions{ID: uuid.NewString(), Trigger: starflowtype.TriggerAPI}
	if d.DeliveryID != "" {
		queued["delivery"] = d.DeliveryID
		opts.IdempotencyKey = webhookKeyPrefix + d.Workflow + ":" + d.DeliveryID
	}
	p, err := e.enqueueParams(ctx, d.Workflow, json.RawMessage(d.Body), opts)
	if err != nil {
		return nil, err
	}
	p.QueuedPayload, _ = json.Marshal(map[string]any{"webhook": queued}) // a number and a string: cannot fail
	run, err := e.store.EnqueueRun(ctx, p)
	if err != nil {
		return nil, err
	}
	if run.ID != opts.ID && run.WorkflowName != d.Workflow {
		return nil, fmt.Errorf("delivery id %q names a run of another workflow (its idempotency key %q was used by an enqueue of %s): %w",
			d.DeliveryID, opts.IdempotencyKey, run.WorkflowName, starflowtype.ErrConflict)
	}
	e.runner.Notify()
	return &WebhookTriggered{Run: run, Created: run.ID == opts.ID}, nil
}

// VerifyWebhook checks only d's signature, as TriggerWebhook does
// first, and writes nothing: nil when it proves the sender holds the
// workflow's current secret, ErrWebhookUnauthorized when it does not. A
// server that refuses a delivery for a reason of its own (a body that is
// not JSON) calls it first, so that a caller without the secret still
// learns nothing but the refusal.
func (e *Engine) VerifyWebhook(ctx context.Context, d *WebhookDelivery) error {
	_, err := e.verifyWebhook(ctx, d)
	return err
}

// verifyWebhook checks d's signature against the secret of the
// workflow's enabled webhook in ctx's workspace and returns the
// webhook's row.
func (e *Engine) verifyWebhook(ctx context.Context, d *WebhookDelivery) (*state.Webhook, error) {
	ws := e.workspace(ctx)
	row, err := e.store.GetWebhook(ctx, &state.GetWebhookParams{WorkspaceID: ws, WorkflowName: d.Workflow})
	switch {
	case errors.Is(err, starflowtype.ErrNotFound):
		row = nil
	case errors.Is(err, starflowtype.ErrInvalid):
		row = nil // no workflow has an empty name
	case err != nil:
		return nil, err
	}
	secret := ""
	if row != nil && row.Enabled {
		key, err := e.engine.KeyByID(ctx, row.KeyID)
		switch {
		case errors.Is(err, starflowtype.ErrNoWakeKeys):
			return nil, err // a misconfigured process, not the sender's mistake
		case err != nil:
			e.cfg.Logger.Warn("webhook delivery refused: the webhook's signing key has left the key ring; enable the webhook again to rotate it",
				"workspace", ws, "workflow", d.Workflow, "key_id", row.KeyID)
		default:
			secret = webhook.Secret(key.Secret, ws, d.Workflow, row.Generation)
		}
	}
	if secret == "" {
		// The same work as a wrong signature, under a secret nobody has.
		webhook.Verify(unusableSecret, d.Body, d.Signature)
		return nil, ErrWebhookUnauthorized
	}
	if !webhook.Verify(secret, d.Body, d.Signature) {
		return nil, ErrWebhookUnauthorized
	}
	return row, nil
}

// unusableSecret is what a delivery to a workflow without a usable
// webhook is checked against, so that it costs what a wrong signature
// does; the result is ignored (the delivery is refused whatever it is).
const unusableSecret = "no webhook"

// checkDeliveryID refuses a delivery id that is too long or holds
// control characters (it is stored, printed and logged).
func checkDeliveryID(id string) error {
	if len(id) > WebhookDeliveryIDMax {
		return starflowtype.Invalid(fmt.Errorf("the delivery id is %d bytes; at most %d are taken", len(id), WebhookDeliveryIDMax))
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\uFFFD' {
			return starflowtype.Invalid(fmt.Errorf("the delivery id %q holds a control character or bytes that are not UTF-8", id))
		}
	}
	return nil
}

// webhookOf is the Webhook of a stored row and its secret.
func webhookOf(row *state.Webhook, secret string) *Webhook {
	return &Webhook{Workspace: row.WorkspaceID, Workflow: row.WorkflowName, Generation: row.Generation, KeyID: row.KeyID,
		Enabled: row.Enabled, Secret: secret, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
}
