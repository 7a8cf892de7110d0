package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/state"
)

// webhooker is what `starflow webhooks` needs of a backend: both backends
// implement it (below), each the way the rest of its commands act — an
// engine over the store, or the server's HTTP API.
type webhooker interface {
	// enableWebhook enables or rotates workflow's webhook in workspace
	// ("" = the backend's: the store's default, the key's).
	enableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error)
	// webhook reads workflow's enabled webhook (ErrNotFound: none).
	webhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error)
	// disableWebhook disables it (ErrNotFound: none enabled).
	disableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error)
}

var (
	_ webhooker = (*localBackend)(nil)
	_ webhooker = (*remoteBackend)(nil)
)

// newWebhooksCmd is `starflow webhooks enable|show|disable WORKFLOW`.
func newWebhooksCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Enable, show and disable a workflow's webhook trigger (signed deliveries start runs)",
		Long: `A workflow's webhook trigger lets a sender that cannot hold an API key (GitHub, a payment
provider, a form service) start runs: it POSTs a JSON object — the run's input — to the
webhook's URL, POST /api/workflows/NAME/trigger?workspace=W, signed in the header
` + api.WebhookSignatureHeader + `: sha256=<hex of HMAC-SHA256(secret, body)> (GitHub's ` + api.GitHubSignatureHeader + `
is read too). A missing or wrong signature is refused (401) and creates nothing.

enable prints the URL and the secret, and every enable makes a new secret (a rotation: the
previous one stops working at once); show prints them again; disable refuses deliveries
from then on. The store keeps no secret: it is derived from the server's wake-token key
(` + envWakeKeys + ` or the key file), so every process must have the same keys.

On a store (--db, --store) the commands act in --workspace (default ` + state.DefaultWorkspace + `) and print the
URL's path (the server's address goes before it); through a server (--server or
` + envServer + `, an admin key without an env) in the key's workspace, printing the whole URL.`,
	}
	cmd.AddCommand(newWebhookEnableCmd(g), newWebhookShowCmd(g), newWebhookDisableCmd(g))
	return cmd
}

// webhookFlags are the flags every webhooks command takes.
type webhookFlags struct {
	workspace string
	asJSON    bool
}

func (f *webhookFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "the workflow's workspace (on a store, default "+state.DefaultWorkspace+"; through a server, checked against the key's)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the webhook as JSON (url, secret, header, generation, …)")
}

// webhookCmd is one webhooks subcommand: act on the backend, then print.
func webhookCmd(g *globalFlags, use, short, long string, act func(ctx context.Context, w webhooker, ws, workflow string) (*api.Webhook, error), done string) *cobra.Command {
	var f webhookFlags
	cmd := &cobra.Command{
		Use: use + " WORKFLOW", Short: short, Long: long,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withBackend(cmd, g, backendOptions{wakeKeys: true}, func(ctx context.Context, b backend) error {
				if err := b.open(ctx); err != nil {
					return err
				}
				w, err := act(ctx, b.(webhooker), f.workspace, args[0])
				if isNotFound(err) {
					return &exitError{code: 1, msg: fmt.Sprintf("%s %s", oneLine(err.Error()), b.where())}
				}
				if err != nil {
					return err
				}
				if f.asJSON {
					return printJSON(w)
				}
				printWebhook(w, done)
				return nil
			})
		},
	}
	f.add(cmd)
	return remoteCommand(cmd)
}

func newWebhookEnableCmd(g *globalFlags) *cobra.Command {
	return webhookCmd(g, "enable", "Enable a workflow's webhook, or rotate its secret; prints its URL and secret",
		`Enable the workflow's webhook trigger and print its URL, secret and header. When it is
enabled already this is a rotation: a new generation and a new secret, and the previous
secret stops working at once (give the sender the new one first if it cannot be down).`,
		func(ctx context.Context, w webhooker, ws, wf string) (*api.Webhook, error) {
			return w.enableWebhook(ctx, ws, wf)
		},
		"enabled")
}

func newWebhookShowCmd(g *globalFlags) *cobra.Command {
	return webhookCmd(g, "show", "Print a workflow's enabled webhook: URL, secret, header, generation",
		`Print the workflow's enabled webhook trigger: its URL, secret, header and generation. Exit 1
when the workflow has none (never enabled, or disabled).`,
		func(ctx context.Context, w webhooker, ws, wf string) (*api.Webhook, error) {
			return w.webhook(ctx, ws, wf)
		},
		"enabled")
}

func newWebhookDisableCmd(g *globalFlags) *cobra.Command {
	return webhookCmd(g, "disable", "Disable a workflow's webhook: deliveries are refused from now on",
		`Disable the workflow's webhook trigger: every delivery is refused (401), as for a workflow
that never had one. Enabling it again makes a new secret. Exit 1 when it has no enabled
webhook.`,
		func(ctx context.Context, w webhooker, ws, wf string) (*api.Webhook, error) {
			return w.disableWebhook(ctx, ws, wf)
		},
		"disabled")
}

// printWebhook prints a webhook for people; the secret goes to stdout
// like everything else (use --json to keep it out of a terminal's
// scroll-back in scripts).
func printWebhook(w *api.Webhook, done string) {
	fmt.Printf("webhook of workflow %s (workspace %s) %s, generation %d\n", termSafe(w.Workflow), termSafe(w.Workspace), done, w.Generation)
	if !w.Enabled {
		fmt.Println("  deliveries are refused from now on; enabling it again makes a new secret")
		return
	}
	if strings.HasPrefix(w.URL, "/") {
		fmt.Printf("  path:    %s  (put the server's address before it)\n", termSafe(w.URL))
	} else {
		fmt.Printf("  url:     %s\n", termSafe(w.URL))
	}
	fmt.Printf("  secret:  %s\n", w.Secret)
	fmt.Printf("  header:  %s: sha256=<hex of HMAC-SHA256(secret, raw body)>  (or %s)\n", w.Header, api.GitHubSignatureHeader)
	fmt.Printf("  body:    a JSON object, the run's input; %s: <id> makes redeliveries start no second run\n", api.WebhookDeliveryHeader)
}

// The local backend: the engine over the store.

func (l *localBackend) webhookEngine(ctx context.Context, workspace string) (context.Context, *starflow.Engine, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	return starflow.WithScope(ctx, starflow.Scope{Workspace: workspace}), eng, nil
}

func (l *localBackend) enableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	ctx, eng, err := l.webhookEngine(ctx, workspace)
	if err != nil {
		return nil, err
	}
	w, err := eng.EnableWebhook(ctx, workflow)
	return localWebhook(w), err
}

func (l *localBackend) webhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	ctx, eng, err := l.webhookEngine(ctx, workspace)
	if err != nil {
		return nil, err
	}
	w, err := eng.Webhook(ctx, workflow)
	return localWebhook(w), err
}

func (l *localBackend) disableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	ctx, eng, err := l.webhookEngine(ctx, workspace)
	if err != nil {
		return nil, err
	}
	w, err := eng.DisableWebhook(ctx, workflow)
	return localWebhook(w), err
}

// localWebhook is the API's shape of a webhook read on the store: its
// URL is only the path (no server answered).
func localWebhook(w *starflow.Webhook) *api.Webhook {
	if w == nil {
		return nil
	}
	out := &api.Webhook{Workflow: w.Workflow, Workspace: w.Workspace, Header: api.WebhookSignatureHeader, Generation: w.Generation,
		KeyID: w.KeyID, Enabled: w.Enabled, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.Enabled {
		out.Secret, out.URL = w.Secret, api.WebhookPath(w.Workspace, w.Workflow)
	}
	return out
}

// The remote backend: the server's HTTP API, in the key's workspace.

// checkWebhookWorkspace refuses, before anything is written, a
// --workspace that is not the caller's.
func (r *remoteBackend) checkWebhookWorkspace(ctx context.Context, workspace string) error {
	if workspace == "" {
		return nil
	}
	me, err := r.c.Me(ctx)
	if err != nil {
		return r.fail(err)
	}
	if me.Workspace != workspace {
		return &exitError{code: 1, msg: fmt.Sprintf("--workspace %s: the API key acts in workspace %s; through a server webhooks are managed in the key's workspace", termSafe(workspace), termSafe(me.Workspace))}
	}
	return nil
}

func (r *remoteBackend) enableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	if err := r.checkWebhookWorkspace(ctx, workspace); err != nil {
		return nil, err
	}
	w, err := r.c.EnableWebhook(ctx, workflow)
	return w, r.fail(err)
}

func (r *remoteBackend) webhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	if err := r.checkWebhookWorkspace(ctx, workspace); err != nil {
		return nil, err
	}
	w, err := r.c.Webhook(ctx, workflow)
	return w, r.fail(err)
}

func (r *remoteBackend) disableWebhook(ctx context.Context, workspace, workflow string) (*api.Webhook, error) {
	if err := r.checkWebhookWorkspace(ctx, workspace); err != nil {
		return nil, err
	}
	w, err := r.c.DisableWebhook(ctx, workflow)
	return w, r.fail(err)
}
