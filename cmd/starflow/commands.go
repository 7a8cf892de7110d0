package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/workflow"
)

func isNotFound(err error) bool { return errors.Is(err, starflowtype.ErrNotFound) }

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate definitions; errors name file:line:column",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				def, err := workflow.ParseFile(path, workflow.ParseOptions{})
				if err != nil {
					bad++
					fmt.Fprintln(os.Stderr, err.Error())
					continue
				}
				fmt.Printf("%s: ok (%s, %d steps, revision %s)\n", path, def.Name, len(def.Steps), def.Revision()[:12])
			}
			if bad > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d of %d definitions are invalid", bad, len(args))}
			}
			return nil
		},
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
	return &cobra.Command{
		Use:   "apply FILE...",
		Short: "Validate definitions and store them by revision",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			eng, err := starflow.New(starflow.Config{Store: store, Logger: g.logger(os.Stderr)})
			if err != nil {
				return err
			}
			for _, path := range args {
				src, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("cannot read %s: %w", path, unwrapPathError(err))
				}
				d, err := eng.Apply(ctx, path, src)
				if err != nil {
					return validationExit(err)
				}
				fmt.Printf("%s: applied %s revision %s\n", path, d.Name, d.Revision)
			}
			return nil
		},
	}
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

func newWorkerCmd(g *globalFlags) *cobra.Command {
	var pools, allowEnv []string
	var leaseTTL, heartbeat, poll, grace time.Duration
	var concurrency int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Claim and execute queued runs until stopped (SIGTERM/SIGINT stop it gracefully)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			log := g.logger(os.Stderr)
			eng, err := starflow.New(starflow.Config{
				Store: store, Logger: log, Pools: pools, LeaseTTL: leaseTTL, Heartbeat: heartbeat,
				PollInterval: poll, Concurrency: concurrency, AllowEnv: allowEnv,
			})
			if err != nil {
				return err
			}
			if err := eng.Start(ctx); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "worker %s started on %s\n", eng.RunnerID(), redactURL(g.storeURL()))
			<-ctx.Done()
			signal.Reset(os.Interrupt, syscall.SIGTERM) // a second signal kills at once
			fmt.Fprintf(os.Stderr, "worker %s stopping (grace %s)\n", eng.RunnerID(), grace)
			stopCtx, cancel := contextWithTimeout(grace)
			defer cancel()
			return eng.Stop(stopCtx)
		},
	}
	cmd.Flags().StringSliceVar(&pools, "pool", nil, "runner pools to serve (repeatable); runs with no pool are always served")
	cmd.Flags().StringSliceVar(&allowEnv, "allow-env", nil, "environment variables expressions may read as env.NAME")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", 30*time.Second, "lease time to live")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", 10*time.Second, "lease refresh interval")
	cmd.Flags().DurationVar(&poll, "poll-interval", 200*time.Millisecond, "how often an idle worker looks for work")
	cmd.Flags().DurationVar(&grace, "grace", 20*time.Second, "how long runs in flight may finish after SIGTERM before their leases are released")
	cmd.Flags().IntVar(&concurrency, "concurrency", 8, "runs executed at once")
	return cmd
}
