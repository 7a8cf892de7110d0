package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/starflow/starflow/starflowtype"
)

// roleValues: keys create --role.
var roleValues = []string{string(starflowtype.RoleViewer), string(starflowtype.RoleOperator), string(starflowtype.RoleAdmin), string(starflowtype.RoleWorker)}

// newKeysCmd is `starflow keys create|list|revoke`.
func newKeysCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys, the credentials of the HTTP API",
		Long: `API keys (sf_…) authenticate callers of the HTTP API of starflow server and starflow dev
(Authorization: Bearer KEY; the CLI sends ` + envAPIKey + ` with --server). Each key belongs to
one workspace, optionally one env of it, and has a role: viewer reads; operator also
enqueues, cancels, retriggers and signals; admin also resumes, applies definitions and
manages keys; worker (a remote worker's key) only polls, heartbeats, completes and fails
jobs. Workspace and env names are [a-z0-9][a-z0-9_-]* (at most 100 characters). The store
keeps only a key's SHA-256: a key is shown once, when created.

On a store (--db, --store) these commands manage the keys of every workspace; the first key
is made this way. Through a server (--server or ` + envServer + `, with an admin key) they manage
the keys of the caller's workspace only, of any role, worker included.`,
	}
	cmd.AddCommand(newKeysCreateCmd(g), newKeysListCmd(g), newKeysRevokeCmd(g))
	return cmd
}

func newKeysCreateCmd(g *globalFlags) *cobra.Command {
	var p keyParams
	var role string
	cmd := &cobra.Command{
		Use:   "create --name NAME --role viewer|operator|admin|worker --workspace W [--env E]",
		Short: "Create an API key; the key is printed once, alone on stdout",
		Long: `Create an API key and print it, alone on its line on stdout, so a script can keep it:

  KEY=$(starflow keys create --name ci --role operator --workspace default)

Its id and what it may do go to stderr. The key is shown only now: the store keeps its hash.
On a store, --workspace is required (a SQLite store that does not exist yet is created and
migrated, as apply does). Through a server the key is made in the caller's workspace: omit
--workspace, or give it to have the command refuse, before anything is written, when the
caller's key is of another workspace. --env limits the key to the runs of one env (default
every env of the workspace).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEnum("role", role, roleValues, false); err != nil {
				return err
			}
			p.Role = starflowtype.Role(role)
			if strings.TrimSpace(p.Name) == "" {
				return usageError("--name is required: a name saying who or what uses the key (see %s --help)", cmd.CommandPath())
			}
			if g.serverURL(cmd) == "" && p.Workspace == "" {
				return usageError("--workspace is required on a store: the workspace whose runs the key reaches (the CLI's runs are in workspace default)")
			}
			// The store (and the server) refuse them too; here before anything
			// is opened or sent.
			for _, n := range []struct{ flag, value string }{{"workspace", p.Workspace}, {"env", p.Env}} {
				if n.value == "" {
					continue
				}
				if err := starflowtype.CheckScopeName(n.flag, n.value); err != nil {
					return usageError("--%s: %v (see %s --help)", n.flag, err, cmd.CommandPath())
				}
			}
			return withBackend(cmd, g, backendOptions{create: true}, func(ctx context.Context, b backend) error {
				k, secret, err := b.createKey(ctx, &p)
				if err != nil {
					return err
				}
				fmt.Println(secret)
				fmt.Fprintf(os.Stderr, "created API key %s: %s; shown only now, keep it secret (send it as %s, or Authorization: Bearer)\n",
					k.ID, describeKey(k), envAPIKey)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&p.Name, "name", "", "what the key is for (required)")
	cmd.Flags().StringVar(&role, "role", "", "viewer, operator, admin, or worker (a remote worker: jobs only) (required)")
	cmd.Flags().StringVar(&p.Workspace, "workspace", "", "the workspace the key acts in, a name like default or team-a ([a-z0-9][a-z0-9_-]*; required on a store; through a server, checked against the caller's)")
	cmd.Flags().StringVar(&p.Env, "env", "", "limit the key to the runs of this env, a name like prod ([a-z0-9][a-z0-9_-]*; default: every env)")
	return remoteCommand(cmd)
}

func newKeysListCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	var workspace string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never the keys themselves), oldest first, revoked ones included",
		Long: `List API keys, oldest first, revoked ones included: ID, WORKSPACE, ENV (* = every env),
ROLE, NAME, CREATED, REVOKED (- = in use). On a store every workspace's keys are listed, or
those of --workspace; through a server those of the caller's workspace (--workspace then
checks that it is the one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
				keys, err := b.listKeys(ctx, workspace)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(orEmptySlice(keys))
				}
				tw := newTable(os.Stdout, "ID", "WORKSPACE", "ENV", "ROLE", "NAME", "CREATED", "REVOKED")
				for _, k := range keys {
					env := k.Env
					if env == "" {
						env = "*"
					}
					tw.row(k.ID, k.WorkspaceID, env, string(k.Role), short(k.Name, 60), fmtTime(k.CreatedAt), dash(fmtTime(k.RevokedAt)))
				}
				return tw.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().StringVar(&workspace, "workspace", "", "only the keys of this workspace")
	return remoteCommand(cmd)
}

func newKeysRevokeCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key: its next request is refused (401)",
		Long: `Revoke the API key with id ID (keys list shows the ids) at once: the server refuses its
next request. A key already revoked keeps its first revocation time. Through a server only
the keys of the caller's workspace can be revoked, the caller's own included.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
				noKey := &exitError{code: 1, msg: fmt.Sprintf("no API key with id %q %s (starflow keys list shows them)", args[0], b.where())}
				if _, err := uuid.Parse(args[0]); err != nil || len(args[0]) != 36 {
					return noKey
				}
				k, err := b.revokeKey(ctx, args[0])
				if isNotFound(err) {
					return noKey
				}
				if err != nil {
					return err
				}
				fmt.Printf("API key %s (%s) is revoked since %s\n", k.ID, describeKey(k), fmtTime(k.RevokedAt))
				return nil
			})
		},
	}
	return remoteCommand(cmd)
}

// describeKey is what a key may do: "role R in workspace W (every env),
// named N".
func describeKey(k *starflowtype.APIKey) string {
	env := "every env"
	if k.Env != "" {
		env = "env " + k.Env
	}
	return fmt.Sprintf("role %s in workspace %s (%s), named %s", k.Role, termSafe(k.WorkspaceID), termSafe(env), termSafe(k.Name))
}
