package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// Webhook triggers (issue 15): an admin enables, reads and disables a
// workflow's webhook (/api/workflows/{name}/webhook); senders that hold
// its secret, not an API key, POST signed deliveries to
// /api/workflows/{name}/trigger. The trigger needs no key (protected
// leaves it open, as it does POST /wake/{token}): the signature is its
// authority.

// webhookInput names a workflow's webhook and remembers where the
// request reached this server, for the webhook's URL.
type webhookInput struct {
	NameParam
	base string // scheme://host of the request
}

// Resolve implements huma.Resolver: it reads the request's scheme and
// Host.
func (in *webhookInput) Resolve(hctx huma.Context) []error {
	scheme := "http"
	if r, _ := humago.Unwrap(hctx); r != nil {
		if overTLS(r) {
			scheme = "https"
		}
		in.base = scheme + "://" + r.Host
	}
	return nil
}

type webhookOutput struct{ Body *api.Webhook }

// triggerInput is a delivery. Nothing of it is validated before the
// signature is checked, so a request without the secret is answered
// 401 whatever else is wrong with it.
type triggerInput struct {
	Name           string `path:"name" doc:"The workflow whose webhook is called."`
	Workspace      string `query:"workspace" doc:"The workspace of the workflow (default: the server's, usually default); the webhook's url names it."`
	Signature      string `header:"X-Starflow-Signature-256" doc:"sha256= and the hex HMAC-SHA256 of the raw body, keyed with the webhook's secret."`
	HubSignature   string `header:"X-Hub-Signature-256" doc:"GitHub's name for the same signature, read when X-Starflow-Signature-256 is absent."`
	Delivery       string `header:"X-Starflow-Delivery" doc:"The sender's id of this delivery: a redelivery with the same id starts no second run (202 with the first run)."`
	GitHubDelivery string `header:"X-GitHub-Delivery" doc:"GitHub's name for the delivery id, read when X-Starflow-Delivery is absent."`
	ContentType    string `header:"Content-Type" doc:"application/json (or another JSON type, or none)."`
	RawBody        []byte `contentType:"application/json" doc:"A JSON object: the run's input."`
}

type triggerOutput struct {
	Status int
	Body   *api.WebhookTriggered
}

// triggerPath reports whether path is a workflow's trigger,
// /api/workflows/{name}/trigger, which needs no key.
func triggerPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/api/workflows/")
	if !ok {
		return false
	}
	name, tail, ok := strings.Cut(rest, "/")
	return ok && name != "" && tail == "trigger"
}

func (s *apiServer) registerWebhooks() {
	webhookErrors := func(o huma.Operation) huma.Operation {
		return withErrors(o, http.StatusNotFound, http.StatusConflict)
	}
	huma.Register(s.api, webhookErrors(op("enable-webhook", http.MethodPost, "/api/workflows/{name}/webhook", starflowtype.RoleAdmin,
		"Enable the workflow's webhook trigger, or rotate its secret: every call moves to a new generation, and the previous secret stops working at once", "webhooks")),
		func(ctx context.Context, in *webhookInput) (*webhookOutput, error) {
			return s.webhookAction(ctx, in, s.engine.EnableWebhook)
		})
	huma.Register(s.api, webhookErrors(op("get-webhook", http.MethodGet, "/api/workflows/{name}/webhook", starflowtype.RoleAdmin,
		"Read the workflow's enabled webhook trigger: its URL, secret, header and generation", "webhooks")),
		func(ctx context.Context, in *webhookInput) (*webhookOutput, error) {
			return s.webhookAction(ctx, in, s.engine.Webhook)
		})
	huma.Register(s.api, webhookErrors(op("disable-webhook", http.MethodDelete, "/api/workflows/{name}/webhook", starflowtype.RoleAdmin,
		"Disable the workflow's webhook trigger: deliveries are refused (401) at once; enabling it again gives a new secret", "webhooks")),
		func(ctx context.Context, in *webhookInput) (*webhookOutput, error) {
			return s.webhookAction(ctx, in, s.engine.DisableWebhook)
		})

	huma.Register(s.api, s.withBody(huma.Operation{
		OperationID: "trigger-workflow", Method: http.MethodPost, Path: "/api/workflows/{name}/trigger", Tags: []string{"webhooks"},
		Summary: "Start a run of the workflow from a signed webhook delivery; the JSON body becomes its input",
		Description: "Needs no API key: the signature is the credential. " + api.WebhookSignatureHeader + " (or GitHub's " + api.GitHubSignatureHeader +
			") carries sha256= and the hex HMAC-SHA256 of the raw body keyed with the webhook's secret. A missing or wrong signature, one of an " +
			"earlier generation, and a workflow without an enabled webhook are all 401, and nothing is created. The body is checked only after the signature.",
		DefaultStatus: http.StatusAccepted,
		// The body is read as bytes and checked after the signature:
		// huma neither parses nor validates it. Its size (the input cap:
		// the body is the input) is checked after the rate, before the
		// signature: withBody's middleware runs after limitTrigger.
		SkipValidateBody: true,
		Errors: []int{http.StatusUnauthorized, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
			http.StatusUnprocessableEntity, http.StatusTooManyRequests},
		Middlewares: huma.Middlewares{s.limitTrigger},
	}, bodyRule{limit: workflow.LimitInputBytes, max: s.engine.Limits().InputBytes, exact: true}), s.trigger)
	// huma makes a raw body required (400 before the handler); an empty
	// delivery is refused as any other body, after the signature. The
	// operation the document lists is the one huma serves.
	if p := s.api.OpenAPI().Paths["/api/workflows/{name}/trigger"]; p != nil && p.Post != nil && p.Post.RequestBody != nil {
		p.Post.RequestBody.Required = false
	}
}

// webhookAction runs an admin's webhook operation (enable, read,
// disable) on the workflow in's path names, in the caller's workspace.
func (s *apiServer) webhookAction(ctx context.Context, in *webhookInput, f func(context.Context, string) (*starflow.Webhook, error)) (*webhookOutput, error) {
	if err := wholeWorkspace(ctx, "webhooks"); err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	w, err := f(ctx, in.Name)
	if err != nil {
		return nil, s.fail(err)
	}
	out := &api.Webhook{Workflow: w.Workflow, Workspace: w.Workspace, Header: api.WebhookSignatureHeader, Generation: w.Generation,
		KeyID: w.KeyID, Enabled: w.Enabled, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.Enabled {
		out.Secret = w.Secret
		out.URL = in.base + api.WebhookPath(w.Workspace, w.Workflow)
	}
	return &webhookOutput{out}, nil
}

// limitTrigger applies the API's rate to deliveries, per client address
// (a delivery carries no key), before the body is read; and keeps every
// answer of the trigger out of caches.
func (s *apiServer) limitTrigger(hctx huma.Context, next func(huma.Context)) {
	hctx.SetHeader("Cache-Control", "no-store")
	if s.limit != nil {
		r, _ := humago.Unwrap(hctx)
		if ok, wait := s.limit.allow("webhook:" + clientKey(r, s.cfg.ClientIPHeader)); !ok {
			secs := retryAfterSeconds(wait)
			hctx.SetHeader("Retry-After", strconv.Itoa(secs))
			_ = huma.WriteErr(s.api, hctx, http.StatusTooManyRequests, fmt.Sprintf(
				"this client sent more than %d webhook deliveries at once or more than %g per second; retry after %d s (nothing changed)", s.cfg.Burst, s.cfg.Rate, secs))
			return
		}
	}
	next(hctx)
}

// trigger serves POST /api/workflows/{name}/trigger.
func (s *apiServer) trigger(ctx context.Context, in *triggerInput) (*triggerOutput, error) {
	ws := in.Workspace
	if ws == "" {
		ws = s.engine.ScopeOf(context.Background()).Workspace
	}
	sig := in.Signature
	if sig == "" {
		sig = in.HubSignature
	}
	delivery := in.Delivery
	if delivery == "" {
		delivery = in.GitHubDelivery
	}
	ctx, cancel := s.ctx(starflow.WithScope(ctx, starflow.Scope{Workspace: ws}))
	defer cancel()
	// The Content-Type is checked after the signature, with the body:
	// a request without the secret learns nothing but 401.
	d := &starflow.WebhookDelivery{Workflow: in.Name, Body: in.RawBody, Signature: sig, DeliveryID: delivery}
	if in.ContentType != "" && !isJSONType(in.ContentType) {
		switch err := s.engine.VerifyWebhook(ctx, d); {
		case errors.Is(err, starflow.ErrWebhookUnauthorized):
			return nil, webhookUnauthorized()
		case err != nil:
			return nil, s.fail(err)
		}
		return nil, huma.NewError(http.StatusUnsupportedMediaType, fmt.Sprintf(
			"Content-Type %q: a delivery's body is a JSON object (send application/json; GitHub: Content type application/json); nothing was enqueued", in.ContentType))
	}
	t, err := s.engine.TriggerWebhook(ctx, d)
	var limit *workflow.LimitError
	switch {
	case err == nil:
	case errors.Is(err, starflow.ErrWebhookUnauthorized):
		return nil, webhookUnauthorized()
	case errors.As(err, &limit):
		return nil, huma.Error413RequestEntityTooLarge(err.Error())
	case errors.Is(err, starflowtype.ErrInvalid):
		return nil, huma.Error422UnprocessableEntity("the delivery was signed correctly but cannot start a run: " + state.Message(err, nil) + "; nothing was enqueued")
	default:
		return nil, s.fail(err)
	}
	return &triggerOutput{Status: http.StatusAccepted, Body: &api.WebhookTriggered{
		RunID: t.Run.ID, Workflow: t.Run.WorkflowName, Status: t.Run.Status, Created: t.Created,
	}}, nil
}

// webhookUnauthorized is the one answer to every delivery that does not
// prove it holds the workflow's current secret.
func webhookUnauthorized() error {
	return huma.Error401Unauthorized("the webhook signature is missing or wrong, or this workflow takes no webhooks: send " +
		api.WebhookSignatureHeader + ": sha256=<hex of HMAC-SHA256(secret, body)> with the workflow's current secret; nothing was enqueued")
}
