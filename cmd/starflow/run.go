package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

func newRunCmd(g *globalFlags) *cobra.Command {
	var input, mode string
	var allowEnv []string
	var stepTimeout time.Duration
	var egressF egressFlags
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Apply a definition, run it to the end in-process and show progress",
		Long: `Apply the definition in FILE to the store, enqueue a run of it, and execute it with an
in-process runner (the same claim-and-lease path a separate worker uses), showing one line per
step. Prints the run id; exits 0 when the run succeeded and 1 with the error when it failed.

When the run parks at a durable wait it prints the step, what it waits for (a signal, a
timer, an approval, a child run) and the command that wakes it, and keeps waiting: a signal
or wake from another terminal continues it here, and due timers and wait timeouts fire in
this process. Child runs (workflow_call) run here too. Ctrl-C leaves a paused run paused
(it holds no lease); starflow dev or starflow worker continues it once woken.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := checkEnum("recovery-mode", mode, recoveryModeValues, true); err != nil {
				return err
			}
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			src, err := readSource(args[0], limits)
			if err != nil {
				return err
			}
			in, err := readInput(input, limits)
			if err != nil {
				return err
			}
			keys, keyFile, err := wakeKeysEnv()
			if err != nil {
				return err
			}
			egressPolicy, err := egressF.policy(cmd)
			if err != nil {
				return err
			}
			store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			// The in-process runner claims only this command's run (same
			// claim path as a worker, limited by id).
			runID := uuid.NewString()
			tracing, err := startTracing(ctx, g.logger(os.Stderr))
			if err != nil {
				return err
			}
			defer tracing.flush()
			eng, err := starflow.New(starflow.Config{
				Store: store, Logger: g.logger(os.Stderr), AllowEnv: allowEnv, StepTimeout: stepTimeout, OnlyRun: runID,
				WakeKeys: keys, WakeKeyFile: keyFile, Egress: egressPolicy, Limits: limits,
				TracerProvider: tracing.Provider, Propagator: tracing.Propagator,
			})
			if err != nil {
				return err
			}
			// Before the run exists: a missing key ring (PostgreSQL without
			// STARFLOW_WAKE_KEYS) must not leave a queued run behind.
			if err := eng.LoadWakeKeys(ctx); err != nil {
				return err
			}
			parsed, err := eng.Parse(args[0], src)
			if err != nil {
				return validationExit(err)
			}
			for _, name := range parsed.Secrets {
				v, ok := os.LookupEnv(name)
				if !ok || v == "" {
					return fmt.Errorf("the workflow needs secret %s: set the environment variable %s", name, name)
				}
				if len(v) < engine.MinSecretLength {
					return fmt.Errorf("secret %s is shorter than %d bytes; it could not be scrubbed safely from what Starflow stores", name, engine.MinSecretLength)
				}
			}
			def, err := eng.Apply(ctx, args[0], src)
			if err != nil {
				return validationExit(err)
			}
			run, err := eng.Enqueue(ctx, def.Name, in, &starflow.EnqueueOptions{
				ID: runID, Revision: def.Revision, Trigger: starflowtype.TriggerCLI, RecoveryMode: starflowtype.RecoveryMode(mode),
			})
			if err != nil {
				return err
			}
			p := newProgress(os.Stdout, store, run.ID, len(parsed.Steps))
			p.storeArg = g.storeArg()
			p.header(def.Name, def.Revision)
			// A signal ends ctx; the run's step in flight then gets its
			// grace (Stop below), so the engine must not stop at once as
			// Start's context ending would stop it.
			if err := eng.Start(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
			followDone := make(chan struct{})
			// Set before stopFollow: until when the events left may be shown
			// (zero: all of them, the run has ended).
			var drainBy time.Time
			go func() { defer close(followDone); p.follow(followCtx, func() time.Time { return drainBy }) }()
			// The durable timer poller of this process: a parked run's
			// timer, until or timeout fires while `run` waits for it.
			timersDone := make(chan struct{})
			go func() { defer close(timersDone); fireTimers(followCtx, eng, g.logger(os.Stderr)) }()

			final, waitErr := eng.WaitRun(ctx, run.ID)
			grace := 10 * time.Second
			if waitErr != nil {
				// Interrupted (Ctrl-C, SIGTERM): a second signal kills at
				// once; the step in flight gets a short grace, then the
				// lease is released so a worker can continue the run.
				// Showing the events left fits in the same grace: the
				// command exits within it whatever the run's size.
				signal.Reset(os.Interrupt, syscall.SIGTERM)
				grace = interruptGrace
				drainBy = time.Now().Add(grace)
			}
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
			_ = eng.Stop(stopCtx)
			cancel()
			stopFollow()
			<-followDone
			<-timersDone
			var last *starflowtype.Run
			if waitErr != nil {
				if r, err := store.GetRun(context.WithoutCancel(ctx), &state.GetRunParams{ID: run.ID}); err == nil {
					last = r
					if starflow.Settled(r) {
						final, waitErr = r, nil
					}
				}
			}
			if waitErr != nil && last != nil && last.Status == starflowtype.RunPaused && last.ClaimState == starflowtype.ClaimParked {
				p.finish(nil)
				return pausedExit(context.WithoutCancel(ctx), store, g, last)
			}
			if waitErr != nil {
				p.finish(nil)
				if last != nil && last.Status == starflowtype.RunPaused { // woken, not claimed again yet
					fmt.Printf("run %s interrupted; it was woken and is queued for a runner\n", run.ID)
				} else {
					fmt.Printf("run %s interrupted; its lease was released\n", run.ID)
				}
				return &exitError{code: 130, msg: fmt.Sprintf("interrupted; run %s will continue on the next runner: starflow worker --store %s (or starflow dev)", run.ID, redactURL(g.storeURL()))}
			}
			p.finish(final)
			switch final.Status {
			case starflowtype.RunSucceeded:
				return nil
			default:
				return &exitError{code: 1, msg: fmt.Sprintf("run %s %s: %s", final.ID, final.Status, oneLine(final.Error))}
			}
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "run input: a JSON object, or @FILE to read it from a file")
	cmd.Flags().StringVar(&mode, "recovery-mode", "", "override the definition's recovery mode: replay, resume or manual")
	cmd.Flags().StringSliceVar(&allowEnv, "allow-env", nil, "environment variables expressions may read as env.NAME (repeatable)")
	cmd.Flags().DurationVar(&stepTimeout, "step-timeout", 0, "default timeout of one step try (default 30s)")
	egressF.register(cmd)
	lf.register(cmd, limitsDefinition, limitsInput, limitsRun)
	return cmd
}

// interruptGrace is how long an interrupted `starflow run` lets the steps
// in flight finish (and shows the events left) before it releases the
// run's lease and exits.
const interruptGrace = 2 * time.Second

// fireTimers runs the durable timer poller of `starflow run` until ctx is
// done: every second, due timers and wait timeouts of the store are fired
// (Engine.FireDueWaits) and the runner nudged, so a run parked on a timer
// continues under `run` alone. The lease sweep and notify retries stay
// with the maintenance leader (a `dev`, `worker` or `server`).
func fireTimers(ctx context.Context, eng *starflow.Engine, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := eng.FireDueWaits(ctx); err != nil && ctx.Err() == nil {
			log.Warn("firing due timers failed", "error", err)
		}
	}
}

// pausedExit is `run`'s answer to Ctrl-C while its run is parked: where
// it is paused, that it holds no lease, and how to wake and continue it.
func pausedExit(ctx context.Context, store state.Adapter, g *globalFlags, r *starflowtype.Run) error {
	waits, _ := pendingWaits(ctx, store, r.ID)
	fmt.Printf("run %s is %s; it holds no lease and no runner\n", r.ID, pausedAt(waits))
	for _, w := range waits {
		fmt.Printf("  %s: %s\n", stepLabel(w), wakeHow(r.ID, w, g.storeArg()))
		if hint := noWorkerHint(ctx, store, w.WorkspaceID, w); hint != "" {
			fmt.Printf("  %s: %s\n", stepLabel(w), hint)
		}
	}
	return &exitError{code: 130, msg: fmt.Sprintf("interrupted; run %s stays %s. Once woken, a runner continues it: "+
		"starflow dev%s, or starflow worker%s (either runs maintenance: timers fire)",
		r.ID, pausedAt(waits), g.storeArg(), g.storeArg())}
}

// readInput reads --input: inline JSON or @FILE (read no further than
// the input cap of l), a JSON object whose numbers are all finite. Every
// refusal is a usage error (exit 2, before anything is opened), as a
// --payload's is.
func readInput(s string, l workflow.Limits) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	data, size := []byte(s), int64(len(s))
	where := "--input"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, n, err := readFileLimited(name, l.InputBytes)
		if err != nil {
			return nil, usageError("cannot read input file %s: %v", name, unwrapPathError(err))
		}
		data, size, where = b, n, name
	}
	if err := l.CheckInput(int(size)); err != nil {
		return nil, usageError("%s: %v", where, err)
	}
	v, err := jsonvalue.Decode(data)
	if errors.Is(err, jsonvalue.ErrNonFinite) {
		return nil, usageError("%s: %v", where, err)
	}
	if err != nil {
		var x any
		if uerr := json.Unmarshal(data, &x); uerr != nil {
			err = uerr // its syntax error has the offset
		}
		return nil, usageError("%s is not valid JSON: %s", where, jsonErrorText(data, err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageError("%s must be a JSON object", where)
	}
	return data, nil
}

func jsonErrorText(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, c := range data[:min(int(se.Offset), len(data))] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("%v at line %d, column %d", err, line, col)
	}
	return err.Error()
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readSource reads a definition file within the source cap: a larger file
// is refused (as a validation problem) without being read whole.
func readSource(path string, l workflow.Limits) ([]byte, error) {
	src, err := workflow.ReadSource(path, l)
	var verrs workflow.Errors
	switch {
	case errors.As(err, &verrs):
		return nil, validationExit(err)
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %w", path, unwrapPathError(err))
	}
	return src, nil
}

// validationExit prints every validation problem on its own line.
func validationExit(err error) error {
	var verrs workflow.Errors
	if errors.As(err, &verrs) {
		return &exitError{code: 1, msg: "invalid definition:\n" + err.Error()}
	}
	return err
}
