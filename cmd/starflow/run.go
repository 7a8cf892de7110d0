package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

func newRunCmd(g *globalFlags) *cobra.Command {
	var input, mode string
	var allowEnv []string
	var stepTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Apply a definition, run it to the end in-process and show progress",
		Long: `Apply the definition in FILE to the store, enqueue a run of it, and execute it with an
in-process runner (the same claim-and-lease path a separate worker uses), showing one line per
step. Prints the run id; exits 0 when the run succeeded and 1 with the error when it failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("cannot read %s: %w", args[0], unwrapPathError(err))
			}
			in, err := readInput(input)
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
			eng, err := starflow.New(starflow.Config{
				Store: store, Logger: g.logger(os.Stderr), AllowEnv: allowEnv, StepTimeout: stepTimeout, OnlyRun: runID,
				WakeKeys: os.Getenv(envWakeKeys),
			})
			if err != nil {
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
			p.header(def.Name, def.Revision)
			if err := eng.Start(ctx); err != nil {
				return err
			}
			followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
			followDone := make(chan struct{})
			go func() { defer close(followDone); p.follow(followCtx) }()

			final, waitErr := eng.WaitRun(ctx, run.ID)
			grace := 10 * time.Second
			if waitErr != nil {
				// Interrupted (Ctrl-C, SIGTERM): a second signal kills at
				// once; the step in flight gets a short grace, then the
				// lease is released so a worker can continue the run.
				signal.Reset(os.Interrupt, syscall.SIGTERM)
				grace = 2 * time.Second
			}
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
			_ = eng.Stop(stopCtx)
			cancel()
			stopFollow()
			<-followDone
			if waitErr != nil {
				if r, err := store.GetRun(context.WithoutCancel(ctx), &state.GetRunParams{ID: run.ID}); err == nil && starflow.Settled(r) {
					final, waitErr = r, nil
				}
			}
			if waitErr != nil {
				p.finish(nil)
				fmt.Printf("run %s interrupted; its lease was released\n", run.ID)
				return &exitError{code: 130, msg: fmt.Sprintf("interrupted; run %s will continue on the next runner: starflow worker --store %s", run.ID, redactURL(g.storeURL()))}
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
	return cmd
}

// readInput reads --input: inline JSON or @FILE.
func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	data := []byte(s)
	where := "--input"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("cannot read input file %s: %w", name, unwrapPathError(err))
		}
		data, where = b, name
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %s", where, jsonErrorText(data, err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s must be a JSON object", where)
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

// validationExit prints every validation problem on its own line.
func validationExit(err error) error {
	var verrs workflow.Errors
	if errors.As(err, &verrs) {
		return &exitError{code: 1, msg: "invalid definition:\n" + err.Error()}
	}
	return err
}
