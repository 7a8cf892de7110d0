package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// Environment variables (SPEC Appendix A).
const (
	envStore = "STARFLOW_STORE"
	envDB    = "STARFLOW_DB"
	// envServer names a Starflow server (its HTTP API) that the commands
	// reading or steering runs act on instead of a store (--server).
	envServer = "STARFLOW_SERVER"
	// envAPIKey is the API key (sf_…) sent to --server (--api-key).
	envAPIKey = "STARFLOW_API_KEY"
)

// defaultDB is the SQLite file used when neither --store nor --db is given.
const defaultDB = "./starflow.db"

type globalFlags struct {
	store   string
	db      string
	verbose bool
	log     logFlags
	// server is --server (a Starflow server's URL) and apiKey --api-key;
	// remote() resolves them with STARFLOW_SERVER and STARFLOW_API_KEY.
	server string
	apiKey string
	// leaseTTL is the runner's lease TTL when the command runs a runner;
	// PostgreSQL connections then end transactions idle for longer than
	// two thirds of it (SPEC §5: below the TTL).
	leaseTTL time.Duration
	// mirror installs the mirror's transaction hook (mirror_outbox rows
	// in every write's transaction): set by processes with a warm tier,
	// and by every command when STARFLOW_WARM names one.
	mirror bool
}

// hooks are the transaction hooks of the store the flags open.
func (g *globalFlags) hooks() []state.TxHook {
	if g.mirror || mirrorFromEnv() {
		return []state.TxHook{mirror.Hook()}
	}
	return nil
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "starflow",
		Short: "Starflow: durable workflows that survive crashes",
		Long: "Starflow runs declarative workflows (YAML/JSON graphs of steps) durably:\nevery step commits a checkpoint to the store, so a run survives the crash of the process executing it.\n\n" +
			"The commands that read or steer runs, definitions and API keys (enqueue, apply, validate, plan,\n" +
			"runs, signal, wake, keys) work on the store named by --db or --store, or through the HTTP API\n" +
			"of a starflow server or dev named by --server URL or " + envServer + ", sending the API key in\n" +
			envAPIKey + "; they print the same and exit with the same status either way. Exit status: 0 done;\n" +
			"1 an error (through a server also: a key missing, unknown, revoked or lacking the role, a server\n" +
			"out of reach); 2 a command line refused before anything was read or written (and a signal or\n" +
			"wake payload that is not JSON); wake also exits 3 and 4 (starflow wake --help).",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Before any command runs: one store named, numeric flags in range.
		PersistentPreRunE: checkCommandLine,
	}
	root.PersistentFlags().StringVar(&g.store, "store", "", "store URL: postgres://USER@HOST:PORT/DB[?schema=NAME] or sqlite://PATH (env "+envStore+")")
	root.PersistentFlags().StringVar(&g.db, "db", "", "SQLite database file, shorthand for --store sqlite://PATH (env "+envDB+", default "+defaultDB+")")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log engine activity to stderr (--log-level debug)")
	root.PersistentFlags().StringVar(&g.log.format, "log-format", logFormatAuto, "log format on stderr: auto (text on a terminal, JSON otherwise), text or json")
	root.PersistentFlags().StringVar(&g.log.level, "log-level", "", "log level: debug, info, warn or error (default info for dev, server and worker, warn for other commands; debug with -v)")
	root.PersistentFlags().StringVar(&g.server, "server", "", "act through the HTTP API of the Starflow server at this URL (http://HOST:PORT) instead of a store; the commands that read or steer runs, definitions and keys accept it (env "+envServer+")")
	root.PersistentFlags().StringVar(&g.apiKey, "api-key", "", "the API key (sf_…) sent to --server; prefer the environment variable "+envAPIKey+", which no process listing shows")
	// A flag that does not parse (unknown, or a value of the wrong type) is
	// a usage error: exit 2, before anything is read or written.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%s (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(
		newRunCmd(g), newValidateCmd(g), newSchemaCmd(), newRunsCmd(g), newApplyCmd(g),
		newMigrateCmd(g), newWorkerCmd(g), newServerCmd(g), newDevCmd(g), newEnqueueCmd(g), newPlanCmd(g),
		newSignalCmd(g), newWakeCmd(g), newGCCmd(g), newKeysCmd(g),
		newWebhooksCmd(g),
		newSchedulesCmd(g), newVersionCmd(),
	)
	return root
}

// storeURL resolves --store / --db / env vars to a store URL.
func (g *globalFlags) storeURL() string {
	switch {
	case g.store != "":
		return g.store
	case g.db != "":
		return "sqlite://" + g.db
	case os.Getenv(envStore) != "":
		return os.Getenv(envStore)
	case os.Getenv(envDB) != "":
		return "sqlite://" + os.Getenv(envDB)
	}
	return "sqlite://" + defaultDB
}

// openExistingStore opens the store for commands that only read: a SQLite
// file must already exist (a mistyped --db must not create an empty one).
func (g *globalFlags) openExistingStore(ctx context.Context) (state.Adapter, error) {
	if path, ok := strings.CutPrefix(g.storeURL(), "sqlite://"); ok && path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no Starflow database at %s (give the right one with --db PATH or %s)", path, envDB)
		}
	}
	return g.openStore(ctx)
}

// openStore opens and migrates the store named by the flags.
func (g *globalFlags) openStore(ctx context.Context) (state.Adapter, error) {
	url := g.storeURL()
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return openPostgres(ctx, url, g.leaseTTL, g.hooks(), g.logger(os.Stderr))
	}
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		return nil, fmt.Errorf("store %q: unknown scheme; use postgres://…, sqlite://PATH or --db PATH", redactURL(url))
	}
	if path == "" {
		return nil, fmt.Errorf("store %q: missing the database file path", url)
	}
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Hooks: g.hooks(), Logger: g.logger(os.Stderr)})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	return s, nil
}

// logger returns the CLI's logger on w, at the level and in the format
// of --log-level, --verbose and --log-format (logFlags).
func (g *globalFlags) logger(w io.Writer) *slog.Logger {
	return slog.New(g.log.handler(w, g.log.levelFor(g.verbose)))
}

func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "***" + u[i:]
		}
	}
	return u
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
