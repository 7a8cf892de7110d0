package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/internal/runner"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/warm/natskv"
	"github.com/starflow/starflow/workflow"
)

func isNotFound(err error) bool { return errors.Is(err, starflowtype.ErrNotFound) }

func newValidateCmd(g *globalFlags) *cobra.Command {
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate definitions; errors name file:line:column",
		Long: `Validate definitions without storing them; each problem names file:line:column.
Needs no store. With --server (or ` + envServer + `) the server validates them (POST
/admin/validate, any role), with its step types and limits; only the source size cap
(--max-source-bytes) applies here, when the file is read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			return withBackend(cmd, g, backendOptions{limits: limits}, func(ctx context.Context, b backend) error {
				bad := 0
				for _, path := range args {
					src, err := workflow.ReadSource(path, limits)
					var def *workflow.Definition
					if err == nil {
						def, err = b.validate(ctx, path, src)
					}
					var ee *exitError
					if errors.As(err, &ee) {
						return err // the server cannot be asked
					}
					if err != nil {
						bad++
						fmt.Fprintln(os.Stderr, termText(err.Error()))
						continue
					}
					fmt.Printf("%s: ok (%s, %d steps, revision %s)\n", termSafe(path), termSafe(def.Name), len(def.Steps), def.Revision()[:12])
					warnSelfCalls(path, def)
				}
				if bad > 0 {
					return &exitError{code: 1, msg: fmt.Sprintf("%d of %d definitions are invalid", bad, len(args))}
				}
				return nil
			})
		},
	}
	lf.register(cmd, limitsDefinition)
	return remoteCommand(cmd)
}

// warnSelfCalls warns (on standard error; the definition is valid) about
// each workflow_call of def that calls def itself on every run: its runs
// would nest until the cap on child-run depth fails the deepest.
func warnSelfCalls(path string, def *workflow.Definition) {
	for _, s := range def.SelfCalls() {
		fmt.Fprintln(os.Stderr, termText(fmt.Sprintf("%s:%d:%d: warning: step %s calls workflow %s, its own, on every run: each run would start another until the cap on child-run depth (%s, %d by default) fails the deepest; put the call under a when that ends the recursion",
			path, s.Pos.Line, s.Pos.Column, s.ID, def.Name, workflow.LimitChildDepth.Key, workflow.ChildDepthDefault)))
	}
}

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the definition format (for editors)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := os.Stdout.Write(workflow.Schema())
			return err
		},
	}
}

func newApplyCmd(g *globalFlags) *cobra.Command {
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "apply FILE...",
		Short: "Validate definitions and store them by revision",
		Long: `Validate definitions and store each as the current revision of its workflow (a
revision already stored is stored once). A SQLite store that does not exist yet is created.
With --server (or ` + envServer + `) the server validates and stores them (an admin key).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			return withBackend(cmd, g, backendOptions{create: true, limits: limits}, func(ctx context.Context, b backend) error {
				for _, path := range args {
					src, err := readSource(path, limits)
					if err != nil {
						return err
					}
					d, err := b.apply(ctx, path, src)
					if err != nil {
						return validationExit(err)
					}
					fmt.Printf("%s: applied %s revision %s\n", termSafe(path), termSafe(d.Name), d.Revision)
				}
				return nil
			})
		},
	}
	lf.register(cmd, limitsDefinition)
	return remoteCommand(cmd)
}

func newMigrateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the store's tables",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			fmt.Printf("store %s is up to date\n", redactURL(g.storeURL()))
			return nil
		},
	}
}

// processFlags are the tunables of the long-running processes (worker,
// server, dev).
type processFlags struct {
	pools, allowEnv                              []string
	leaseTTL, heartbeat, poll, grace, sweepEvery time.Duration
	concurrency                                  int
	warm                                         warmFlags
	waits                                        starflow.WaitMaintenanceConfig
	retention                                    retentionFlags
	egress                                       egressFlags
	limits                                       limitFlags
	// maintenance: this process campaigns for the maintenance leadership
	// (--maintenance, default true); leaderTTL is --leader-ttl.
	maintenance bool
	leaderTTL   time.Duration
}

func (f *processFlags) register(cmd *cobra.Command, runner, maintenance bool) {
	if runner {
		cmd.Flags().StringSliceVar(&f.pools, "pool", nil, "runner pools to serve (repeatable); runs with no pool are always served")
		cmd.Flags().StringSliceVar(&f.allowEnv, "allow-env", nil, "environment variables expressions may read as env.NAME")
		cmd.Flags().DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Second, "lease time to live")
		cmd.Flags().DurationVar(&f.heartbeat, "heartbeat", 10*time.Second, "lease refresh interval, at most half of --lease-ttl (when not given: 10s, or a third of --lease-ttl when 10s is more than half of it)")
		cmd.Flags().DurationVar(&f.poll, "poll-interval", 200*time.Millisecond, "how often an idle runner looks for work when no signal arrives")
		cmd.Flags().DurationVar(&f.grace, "grace", 20*time.Second, "how long runs in flight may finish after SIGTERM before their leases are released")
		cmd.Flags().IntVar(&f.concurrency, "concurrency", 8, "runs executed at once")
		f.limits.register(cmd, limitsInput, limitsRun)
	}
	f.egress.register(cmd) // runners send service_call and notify requests; maintenance retries notifies
	f.limits.register(cmd, limitsPayload)
	if maintenance {
		cmd.Flags().BoolVar(&f.maintenance, "maintenance", true, "take part in the maintenance leader election: the leader (one process at a time among those sharing the store) runs the lease sweep, timers, notify retries, session GC, the job sweep, schedules and the warm hash sweep; --maintenance=false leaves them to other processes")
		cmd.Flags().DurationVar(&f.leaderTTL, "leader-ttl", 10*time.Second, "how long a dead maintenance leader keeps the leadership before another process takes over (at least 500ms; candidates retry and the leader renews every fifth of it)")
		cmd.Flags().DurationVar(&f.sweepEvery, "sweep-interval", 30*time.Second, "lease sweep interval (one pass also runs when a process becomes the maintenance leader)")
		cmd.Flags().DurationVar(&f.waits.TimerInterval, "timer-interval", time.Second, "how often due timers and wait timeouts fire (one pass also runs when a process becomes the maintenance leader)")
		cmd.Flags().DurationVar(&f.waits.SessionGCInterval, "session-gc-interval", time.Minute, "how often expired session variables are removed")
		f.retention.register(cmd, true)
	}
}

// resolveHeartbeat checks --lease-ttl and --heartbeat (commands with a
// runner): a heartbeat not given becomes a third of a lease TTL it would
// be more than half of; one given must be at most half of it.
func (f *processFlags) resolveHeartbeat(cmd *cobra.Command) error {
	if cmd.Flags().Lookup("heartbeat") == nil {
		return nil
	}
	// Both are positive (checkFlagRanges).
	if !cmd.Flags().Changed("heartbeat") && f.heartbeat > runner.MaxHeartbeat(f.leaseTTL) {
		f.heartbeat = f.leaseTTL / 3
	}
	if max := runner.MaxHeartbeat(f.leaseTTL); f.heartbeat > max {
		return usageError("--heartbeat %s is more than half of --lease-ttl %s: a run is stopped %s (0.9 × --lease-ttl) after its last lease renewal was sent, and a failed renewal needs time to be retried before then; use --heartbeat %s or less, or --lease-ttl %s or more",
			f.heartbeat, f.leaseTTL, f.leaseTTL-f.leaseTTL/10, max, 2*f.heartbeat)
	}
	return nil
}

// serve runs an engine with cfg until SIGTERM/SIGINT, then stops it
// gracefully.
func (f *processFlags) serve(cmd *cobra.Command, g *globalFlags, what string, cfg starflow.Config) error {
	ctx := cmd.Context()
	g.log.daemon = true // info lines: runs started and ended, retries, recoveries
	if err := f.resolveHeartbeat(cmd); err != nil {
		return err
	}
	if err := f.warm.resolve(cmd); err != nil {
		return err
	}
	keys, keyFile, err := wakeKeysEnv()
	if err != nil {
		return err
	}
	if cfg.Egress, err = f.egress.policy(cmd); err != nil {
		return err
	}
	limits, err := f.limits.resolve()
	if err != nil {
		return err
	}
	g.leaseTTL = f.leaseTTL
	g.mirror = f.warm.enabled()
	store, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	cfg.Store = store
	if f.warm.enabled() {
		dbPath, isSQLite := strings.CutPrefix(g.storeURL(), "sqlite://")
		if !isSQLite {
			dbPath = ""
		}
		ws, err := f.warm.openWarm(ctx, dbPath)
		if err != nil {
			return err
		}
		defer ws.Close()
		cfg.Warm, cfg.WarmOptions = ws, f.warm.opts
	}
	cfg.Logger = g.logger(os.Stderr)
	// Runs of every workspace: the API enqueues into its keys' workspaces.
	cfg.AllWorkspaces = true
	cfg.Pools, cfg.AllowEnv = f.pools, f.allowEnv
	cfg.LeaseTTL, cfg.Heartbeat, cfg.PollInterval, cfg.Concurrency = f.leaseTTL, f.heartbeat, f.poll, f.concurrency
	cfg.SweepInterval = f.sweepEvery
	cfg.WaitMaintenance = f.waits
	cfg.Retention = f.retention.config()
	cfg.Maintenance, cfg.LeaderTTL = f.maintenance, f.leaderTTL
	cfg.WakeKeys, cfg.WakeKeyFile = keys, keyFile
	cfg.Limits = limits
	if err := f.warm.checkExposure(ctx, store, cfg.Logger); err != nil {
		return err
	}
	srv, err := f.warm.bind()
	if err != nil {
		return err
	}
	srv.leaseTTL = f.leaseTTL
	srv.insecure = f.warm.api != nil && f.warm.api.insecure && !httpserver.IsLoopback(f.warm.addr)
	cfg.WakeURL = f.warm.resolveWakeURL(srv)
	var id atomic.Value // the runner id, once the engine exists
	cfg.OnMaintenanceLeader = func(leading bool) {
		if leading {
			fmt.Fprintf(os.Stderr, "%s %s is the maintenance leader (lease sweep, timers, notify retries, session GC, job sweep, schedules)\n", what, id.Load())
		} else {
			fmt.Fprintf(os.Stderr, "%s %s is no longer the maintenance leader\n", what, id.Load())
		}
	}
	tracing, err := startTracing(ctx, cfg.Logger)
	if err != nil {
		return errors.Join(err, srv.shutdown())
	}
	defer tracing.flush()
	cfg.TracerProvider, cfg.Propagator = tracing.Provider, tracing.Propagator
	eng, err := starflow.New(cfg)
	if err != nil {
		return errors.Join(err, srv.shutdown())
	}
	id.Store(eng.RunnerID())
	if err := srv.serve(eng, cfg.Logger); err != nil {
		return errors.Join(err, srv.shutdown())
	}
	// The signal ends ctx; the engine stops with the grace period below
	// (Stop), not at once as Start's context ending would stop it.
	if err := eng.Start(context.WithoutCancel(ctx)); err != nil {
		return errors.Join(err, srv.shutdown())
	}
	if cfg.WakeURL != "" {
		fmt.Fprintf(os.Stderr, "wake URL %s\n", cfg.WakeURL)
	}
	fmt.Fprintf(os.Stderr, "%s %s started on %s (warm tier: %s)\n", what, eng.RunnerID(), redactURL(g.storeURL()), natskv.Redacted(f.warm.spec))
	<-ctx.Done()
	signal.Reset(os.Interrupt, syscall.SIGTERM) // a second signal kills at once
	fmt.Fprintf(os.Stderr, "%s %s stopping (grace %s)\n", what, eng.RunnerID(), f.grace)
	stopCtx, cancel := contextWithTimeout(f.grace)
	defer cancel()
	// The listener answers /healthz until the engine has stopped.
	err = eng.Stop(stopCtx)
	return errors.Join(err, srv.shutdown())
}

func newWorkerCmd(g *globalFlags) *cobra.Command {
	f := &processFlags{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Claim and execute queued runs until stopped (SIGTERM/SIGINT stop it gracefully)",
		Long: `A worker claims queued runs, executes them under fenced leases and releases its leases
on SIGTERM. It also takes part in the maintenance leader election (unless --maintenance=false):
one process at a time among the workers, servers and dev processes sharing the store leads, and
runs the lease sweep (recovering the runs of dead workers), the timer poller, notify retries,
the session-variable GC and the warm tier's hash sweep. When the leader dies another takes
over within --leader-ttl, so a deployment of workers alone leaves no run stuck.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.serve(cmd, g, "worker", starflow.Config{})
		},
	}
	f.register(cmd, true, true)
	f.warm.register(cmd, warmNone, "", true, true)
	return cmd
}

func newServerCmd(g *globalFlags) *cobra.Command {
	f := &processFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the HTTP API (/api/…, /docs; API keys: starflow keys), /healthz, /metrics, live views and POST /wake/{token}, and take part in the maintenance leader election (lease sweep, timer poller, notify retries, session GC, job sweep, schedules, the warm tier's hash sweep); runs no runs; until stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.grace = 5 * time.Second
			return f.serve(cmd, g, "server", starflow.Config{NoRunner: true})
		},
	}
	f.register(cmd, false, true)
	f.warm.register(cmd, warmNone, httpserver.AddrDefault, false, true)
	f.warm.registerAPI(cmd)
	return cmd
}

func newDevCmd(g *globalFlags) *cobra.Command {
	f := &processFlags{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Everything in one process on SQLite: a runner, maintenance (lease sweep, timers, notify retries, session GC, job sweep, schedules), the warm tier (memory) and the HTTP listener (which serves remote workers: /api/jobs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.serve(cmd, g, "dev", starflow.Config{})
		},
	}
	f.register(cmd, true, true)
	f.warm.register(cmd, "memory", httpserver.AddrDefault, true, true)
	f.warm.registerAPI(cmd)
	return cmd
}

func newEnqueueCmd(g *globalFlags) *cobra.Command {
	var input, key, mode, pool string
	var lf limitFlags
	var delay time.Duration
	var priority int
	cmd := &cobra.Command{
		Use:   "enqueue NAME",
		Short: "Enqueue a run of an applied workflow and print its id",
		Long: `Enqueue a run of the newest applied revision of workflow NAME. With --idempotency-key,
a repeat (or a concurrent duplicate) creates no second run and prints the first run's id.
A SQLite store that does not exist yet is created. With --server (or ` + envServer + `) the
server enqueues it in the API key's workspace (an operator key); there a repeat of the key
with another input or other options is refused, 409.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEnum("recovery-mode", mode, recoveryModeValues, true); err != nil {
				return err
			}
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			in, err := readInput(input, limits)
			if err != nil {
				return err
			}
			opts := &starflow.EnqueueOptions{
				IdempotencyKey: key, RecoveryMode: starflowtype.RecoveryMode(mode), Pool: pool,
				Delay: delay, Priority: priority, CompareRequest: true,
			}
			// The engine's bounds, checked here for both paths: a server
			// states the same ones (docs/api.md).
			if err := opts.Validate(); err != nil {
				return usageError("%v (see %s --help)", err, cmd.CommandPath())
			}
			return withBackend(cmd, g, backendOptions{create: true, limits: limits}, func(ctx context.Context, b backend) error {
				run, err := b.enqueue(ctx, args[0], in, opts)
				if err != nil {
					if isNotFound(err) {
						return fmt.Errorf("no workflow named %q has been applied %s (starflow apply FILE)", args[0], b.where())
					}
					if key != "" && errors.Is(err, starflowtype.ErrConflict) {
						return fmt.Errorf("idempotency key %q was used with a different request; nothing was enqueued (use another key)", key)
					}
					return err
				}
				fmt.Println(run.ID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "run input: a JSON object, or @FILE")
	cmd.Flags().StringVar(&key, "idempotency-key", "", fmt.Sprintf("makes the enqueue idempotent: a repeat returns the first run (the same key with another input or options is refused); at most %d characters", starflow.IdempotencyKeyMax))
	cmd.Flags().StringVar(&mode, "recovery-mode", "", "replay, resume or manual (default: the definition's)")
	cmd.Flags().StringVar(&pool, "pool", "", "runner pool (default: the definition's runner_pool, or any)")
	cmd.Flags().Var(newDurationValue(&delay, 0), "delay", "make the run available only after this long (a duration such as 30s or 2h; at most 2562047h)")
	cmd.Flags().Lookup("delay").DefValue = "0" // a zero default goes unsaid, as for pflag's own durations
	cmd.Flags().IntVar(&priority, "priority", 0, fmt.Sprintf("higher is claimed first (from %d to %d)", -starflow.PriorityMax, starflow.PriorityMax))
	lf.register(cmd, limitsInput)
	return remoteCommand(cmd)
}
