package api

import (
	"net/url"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Webhook triggers (issue 15): an admin enables a workflow's webhook
// (POST /api/workflows/{name}/webhook) and gives its URL and secret to a
// sender that cannot hold an API key; the sender POSTs a JSON object to
// the URL, signed in a header the way GitHub signs, and the body becomes
// a run's input. docs/api.md, "Webhook triggers", has a curl example.

// The headers of a webhook delivery.
const (
	// WebhookSignatureHeader carries "sha256=" and the hex HMAC-SHA256 of
	// the raw body under the workflow's secret.
	WebhookSignatureHeader = "X-Starflow-Signature-256"
	// GitHubSignatureHeader is GitHub's name for the same signature,
	// read when WebhookSignatureHeader is absent.
	GitHubSignatureHeader = "X-Hub-Signature-256"
	// WebhookDeliveryHeader is the sender's id of a delivery: a
	// redelivery with the same id starts no second run.
	WebhookDeliveryHeader = "X-Starflow-Delivery"
	// GitHubDeliveryHeader is GitHub's name for the delivery id, read
	// when WebhookDeliveryHeader is absent.
	GitHubDeliveryHeader = "X-GitHub-Delivery"
)

// WebhookPath is the path a sender posts to for workflow's webhook of
// workspace: /api/workflows/{name}/trigger?workspace=W.
func WebhookPath(workspace, workflow string) string {
	return "/api/workflows/" + url.PathEscape(workflow) + "/trigger?" + url.Values{"workspace": {workspace}}.Encode()
}

// Webhook is a workflow's webhook: the answer of POST (enable or rotate),
// GET and DELETE (disable) /api/workflows/{name}/webhook. URL and Secret
// are absent from a disabled webhook.
type Webhook struct {
	Workflow   string    `json:"workflow" doc:"The workflow the webhook starts runs of."`
	Workspace  string    `json:"workspace" doc:"The workspace the runs are created in."`
	URL        string    `json:"url,omitempty" doc:"Where the sender POSTs: this server's /api/workflows/{name}/trigger?workspace=W, as the request that enabled or read the webhook reached it."`
	Secret     string    `json:"secret,omitempty" doc:"The text the sender signs with (sfwh_ and 64 hex digits): HMAC-SHA256 of the raw body with this text as the key."`
	Header     string    `json:"header" doc:"The header the signature goes in: X-Starflow-Signature-256: sha256=<hex> (GitHub's X-Hub-Signature-256 is read too)."`
	Generation int64     `json:"generation" doc:"Counts the webhook's secrets, from 1; every enable moves to the next and the earlier secrets stop working."`
	KeyID      string    `json:"key_id" doc:"The server's signing key the secret derives from (never the key itself)."`
	Enabled    bool      `json:"enabled" doc:"False only in the answer of DELETE."`
	CreatedAt  time.Time `json:"created_at" doc:"The first enable."`
	UpdatedAt  time.Time `json:"updated_at" doc:"The last enable or disable."`
}

// WebhookTriggered is the answer (202) of a verified delivery: the run
// it enqueued, or — a redelivery of the same delivery id — the first
// delivery's run (Created false).
type WebhookTriggered struct {
	RunID    string                 `json:"run_id" doc:"The run's id."`
	Workflow string                 `json:"workflow"`
	Status   starflowtype.RunStatus `json:"status" doc:"The run's status when the answer was made (queued for a new run)."`
	Created  bool                   `json:"created" doc:"False for a redelivery: the run of the first delivery with this delivery id."`
}
