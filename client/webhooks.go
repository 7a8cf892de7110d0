package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/webhook"
)

// EnableWebhook enables workflow's webhook trigger, or rotates its secret
// when it is enabled already (POST /api/workflows/{name}/webhook; admin,
// a key without an env): the answer holds the URL senders post to and
// the new secret; the previous secret stops working at once.
func (c *Client) EnableWebhook(ctx context.Context, workflow string) (*api.Webhook, error) {
	out := &api.Webhook{}
	return out, c.post(ctx, "/api/workflows/"+esc(workflow)+"/webhook", nil, out)
}

// Webhook reads workflow's enabled webhook trigger with its URL and
// secret (GET /api/workflows/{name}/webhook; admin). A workflow without
// one is a 404 problem.
func (c *Client) Webhook(ctx context.Context, workflow string) (*api.Webhook, error) {
	out := &api.Webhook{}
	return out, c.get(ctx, "/api/workflows/"+esc(workflow)+"/webhook", nil, out)
}

// DisableWebhook disables workflow's webhook trigger (DELETE
// /api/workflows/{name}/webhook; admin): deliveries are refused from now
// on. The answer is the webhook, Enabled false. A workflow without an
// enabled webhook is a 404 problem.
func (c *Client) DisableWebhook(ctx context.Context, workflow string) (*api.Webhook, error) {
	out := &api.Webhook{}
	_, err := c.do(ctx, http.MethodDelete, "/api/workflows/"+esc(workflow)+"/webhook", nil, nil, nil, "", out)
	return out, err
}

// Delivery is one webhook delivery Trigger sends.
type Delivery struct {
	// Workspace is the workflow's workspace ("" = the server's).
	Workspace string
	// Secret is the webhook's secret (api.Webhook.Secret): the body is
	// signed with it in X-Starflow-Signature-256.
	Secret string
	// Body is the run's input, a JSON object, sent as is.
	Body []byte
	// DeliveryID, when set, is sent as X-Starflow-Delivery: a repeat with
	// the same id answers the first run instead of starting another.
	DeliveryID string
}

// Trigger sends a signed delivery to workflow's webhook trigger (POST
// /api/workflows/{name}/trigger), as a sender without an API key does
// (the client's key is not needed). A missing or wrong secret is a 401
// problem; a body that cannot start a run 422 (413 over the input cap).
func (c *Client) Trigger(ctx context.Context, workflow string, d Delivery) (*api.WebhookTriggered, error) {
	var q url.Values
	if d.Workspace != "" {
		q = url.Values{"workspace": {d.Workspace}}
	}
	h := http.Header{}
	h.Set(api.WebhookSignatureHeader, SignWebhook(d.Secret, d.Body))
	if d.DeliveryID != "" {
		h.Set(api.WebhookDeliveryHeader, d.DeliveryID)
	}
	out := &api.WebhookTriggered{}
	_, err := c.do(ctx, http.MethodPost, "/api/workflows/"+esc(workflow)+"/trigger", q, h, d.Body, "application/json", out)
	return out, err
}

// SignWebhook is the X-Starflow-Signature-256 value of body under a
// webhook's secret: "sha256=" and the hex HMAC-SHA256 of the raw body,
// keyed with the secret's text.
func SignWebhook(secret string, body []byte) string { return webhook.Sign(secret, body) }
