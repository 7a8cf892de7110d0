package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// backend is where the commands that read or steer runs, definitions and
// API keys act: a store, through an engine in this process
// (localBackend), or a Starflow server, through its HTTP API
// (remoteBackend, with --server or STARFLOW_SERVER). Each command is
// written once over it and prints the same thing either way.
//
// Errors are the engine's and the store's sentinels (errors.Is with
// starflowtype.ErrNotFound, ErrConflict, ErrNoCheckpoint, ErrRevisionMismatch,
// ErrPayloadInvalid, ErrTokenInvalid, ErrWaitClosed) whichever the
// backend: the remote one maps each HTTP status (and 409 code) to its
// sentinel, keeping the server's sentence as the text. What only a server
// can answer — a missing, unknown or revoked key (401), a role too weak
// (403), a server out of reach — comes back as an *exitError already
// worded for people.
type backend interface {
	// where says where a run was looked for: "in this store", "on the
	// server at URL".
	where() string
	// arg is the flag to repeat in a command printed for the user
	// (" --db PATH", " --server URL"; "" when an environment variable or
	// the default names the place).
	arg() string
	// open opens the store now (local), so a store that is missing is
	// said before anything about the arguments; nothing for a server.
	open(ctx context.Context) error
	close()

	// validate checks a definition without storing it: the parsed
	// definition (for its name, steps and revision), or the problems
	// (workflow.Errors naming path) as the error.
	validate(ctx context.Context, path string, src []byte) (*workflow.Definition, error)
	// apply stores a definition as its workflow's current revision.
	apply(ctx context.Context, path string, src []byte) (*starflowtype.Definition, error)
	// plan says which in-flight runs could move onto a definition.
	plan(ctx context.Context, path string, src []byte) (*starflow.Plan, error)
	// enqueue enqueues a run of workflow name (ErrNotFound: not applied).
	enqueue(ctx context.Context, name string, input json.RawMessage, o *starflow.EnqueueOptions) (*starflowtype.Run, error)

	// listRuns lists runs newest first, each with its why-stuck reason:
	// p.WorkflowName, p.Status, p.DeadLettered (with Status failed) and
	// p.Limit only.
	listRuns(ctx context.Context, p *state.ListRunsParams) ([]*api.RunView, error)
	// run reads a run by its id or a unique prefix of it (checked by
	// runRef first); ErrNotFound when none.
	run(ctx context.Context, ref string) (*starflowtype.Run, error)
	// stuck is why a run read by run is stuck (nil when it is not), as
	// of that read: the engine's Stuck on the store, the stuck field of
	// the server's answer.
	stuck(ctx context.Context, r *starflowtype.Run) (*starflowtype.Stuck, error)
	// steps and checkpoints of a run (attempt 0: every attempt).
	steps(ctx context.Context, runID string, attempt int) ([]*starflowtype.Step, error)
	checkpoints(ctx context.Context, runID string, attempt int) ([]*starflowtype.Checkpoint, error)
	// events of a run with an id over after, in id order: all of them.
	events(ctx context.Context, runID string, after int64) ([]*starflowtype.Event, error)
	// waits of a run, oldest first, at most limit; only the pending ones
	// when pending. Token hashes are left out.
	waits(ctx context.Context, runID string, limit int, pending bool) ([]*starflowtype.Wait, error)
	// definition is the stored revision a run was enqueued on, spec
	// included (ErrNotFound when it cannot be read).
	definition(ctx context.Context, r *starflowtype.Run) (*starflowtype.Definition, error)

	resume(ctx context.Context, runID string, o *starflow.ResumeOptions) (*starflowtype.Run, error)
	retrigger(ctx context.Context, runID string) (*starflowtype.Run, error)
	cancel(ctx context.Context, runID string) (*starflowtype.Run, error)
	signal(ctx context.Context, runID, name string, payload json.RawMessage) (*state.SignalResult, error)
	signalKey(ctx context.Context, name, key string, payload json.RawMessage) (*state.SignalResult, error)
	wake(ctx context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error)

	// createKey makes an API key; the secret is returned once.
	createKey(ctx context.Context, p *keyParams) (k *starflowtype.APIKey, secret string, err error)
	// listKeys lists API keys, revoked ones included, oldest first:
	// of workspace ("" = every workspace the backend can see).
	listKeys(ctx context.Context, workspace string) ([]*starflowtype.APIKey, error)
	// revokeKey revokes an API key (ErrNotFound when none has the id).
	revokeKey(ctx context.Context, id string) (*starflowtype.APIKey, error)
}

// keyParams is a new API key.
type keyParams struct {
	Name, Workspace, Env string
	Role                 starflowtype.Role
}

// backendOptions say what a command needs of its backend.
type backendOptions struct {
	// create: a local SQLite file that does not exist yet is created and
	// migrated (apply, enqueue, plan, keys create); otherwise it must
	// exist (a mistyped --db must not create an empty one).
	create bool
	// limits are the command's caps (workflow.Limits from its flags).
	limits workflow.Limits
	// wakeKeys: the local engine verifies wake tokens with
	// STARFLOW_WAKE_KEYS or STARFLOW_WAKE_KEY_FILE (signal, wake).
	wakeKeys bool
}

// serverURL is the server the command acts through: --server, else
// STARFLOW_SERVER unless --db or --store names a store. "" for a store.
func (g *globalFlags) serverURL(cmd *cobra.Command) string {
	f := cmd.Flags()
	switch {
	case g.server != "":
		return g.server
	case f.Changed("db") || f.Changed("store"):
		return ""
	}
	return strings.TrimSpace(os.Getenv(envServer))
}

// backend opens the backend of cmd (a command marked remoteCommand): the
// server when one is named, else the store. The local store is opened
// on first use, so a command that needs none (validate) opens none.
func (g *globalFlags) backend(cmd *cobra.Command, o backendOptions) (backend, error) {
	if u := g.serverURL(cmd); u != "" {
		key := g.apiKey
		if key == "" {
			key = strings.TrimSpace(os.Getenv(envAPIKey))
		}
		arg := ""
		if g.server != "" {
			arg = " --server " + g.server
		}
		return newRemoteBackend(u, key, arg)
	}
	l := &localBackend{g: g, opts: o}
	if o.wakeKeys {
		keys, file, err := wakeKeysEnv()
		if err != nil {
			return nil, err
		}
		l.keys, l.keyFile = keys, file
	}
	return l, nil
}

// runRef checks a run id given on the command line before anything is
// asked: a run id (a uuid), or a prefix of one of at least 8 hex digits
// (hyphens anywhere are ignored). Anything else is "no run with id".
func runRef(b backend, ref string) error {
	if _, err := uuid.Parse(ref); err == nil && len(ref) == 36 {
		return nil
	}
	digits, other := 0, len(ref) > 36
	for _, c := range ref {
		switch {
		case c == '-':
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			digits++
		default:
			other = true
		}
	}
	if !other && digits >= 8 && digits <= 32 {
		return nil
	}
	return &exitError{code: 1, msg: fmt.Sprintf("no run with id %q %s (give a run id, or a unique prefix of it of at least 8 hex digits)", ref, b.where())}
}

// resolveRun reads the run ref names (its id or a unique prefix), with
// the CLI's sentence when there is none.
func resolveRun(ctx context.Context, b backend, ref string) (*starflowtype.Run, error) {
	if err := b.open(ctx); err != nil {
		return nil, err
	}
	if err := runRef(b, ref); err != nil {
		return nil, err
	}
	r, err := b.run(ctx, ref)
	if isNotFound(err) {
		return nil, noRun(b, ref)
	}
	return r, err
}

// noRun is the CLI's answer to a run id (or prefix) that names no run.
func noRun(b backend, ref string) error {
	return &exitError{code: 1, msg: fmt.Sprintf("no run with id %q %s", ref, b.where())}
}

// ambiguousPrefix is the refusal of a run id prefix that more than one
// run starts with, in the server's words (which name no run: a key
// limited to an env must not learn another env's ids).
func ambiguousPrefix(prefix string, _ []string) error {
	return fmt.Errorf("run id prefix %q is ambiguous: give more of the id", prefix)
}

// withBackend opens cmd's backend, calls fn and closes it.
func withBackend(cmd *cobra.Command, g *globalFlags, o backendOptions, fn func(ctx context.Context, b backend) error) error {
	b, err := g.backend(cmd, o)
	if err != nil {
		return err
	}
	defer b.close()
	return fn(cmd.Context(), b)
}
