package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// readPayload validates a --payload value: JSON, or @FILE holding JSON,
// within the payload cap of l, whose numbers are all finite (1e400 is
// refused, exit 2, before the store is opened). Empty means none (the
// wait's output is then null).
func readPayload(s string, l workflow.Limits) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	data, size, where := []byte(s), int64(len(s)), "--payload"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, n, err := readFileLimited(name, l.PayloadBytes)
		if err != nil {
			return nil, &exitError{code: exitBadPayload, msg: fmt.Sprintf("cannot read payload file %s: %v", name, unwrapPathError(err))}
		}
		data, size, where = b, n, "payload file "+name
	}
	if err := l.CheckPayload(int(size)); err != nil {
		return nil, &exitError{code: exitBadPayload, msg: fmt.Sprintf("%s: %v; nothing changed", where, err)}
	}
	if err := jsonvalue.Validate(data); err != nil {
		if errors.Is(err, jsonvalue.ErrNonFinite) {
			return nil, &exitError{code: exitBadPayload, msg: fmt.Sprintf("%s: %v; nothing was sent", where, err)}
		}
		var v any
		if uerr := json.Unmarshal(data, &v); uerr != nil {
			err = uerr // its syntax error has the offset
		}
		return nil, &exitError{code: exitBadPayload, msg: fmt.Sprintf("%s is not valid JSON: %s", where, jsonErrorText(data, err))}
	}
	return json.RawMessage(data), nil
}

func newSignalCmd(g *globalFlags) *cobra.Command {
	var payload, key string
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "signal RUN NAME | signal --correlation-key KEY NAME",
		Short: "Send a named signal to a run's wait (or to the wait with a correlation key)",
		Long: `Send signal NAME with a JSON payload, the wake payload of the wait it wakes (the wait
step's output). Address it to a run:

  starflow signal RUN NAME --payload '{"approved": true}'

or, without knowing the run, by correlation key (the wait's correlation_key):

  starflow signal --correlation-key order-42 NAME --payload '{...}'

The oldest pending wait for NAME (of that run, or with that key) is woken and its run
re-queued, in one transaction. When no such wait exists yet — the run has not reached its
wait step — the signal is kept in the durable wake inbox and consumed when the wait
registers; it is never lost. A NAME that no wait step of the run's definition listens
for (a typo?) is held too, with a warning on stderr naming the signals it does wait for.

With --server (or ` + envServer + `) the server delivers it (an operator key); RUN may be a
unique prefix of the run id (at least 8 hex digits) either way.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case key == "" && len(args) != 2:
				return fmt.Errorf("give RUN and NAME (or --correlation-key KEY and NAME); got %d arguments", len(args))
			case key != "" && len(args) != 1:
				return fmt.Errorf("with --correlation-key give only NAME; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			body, err := readPayload(payload, limits)
			if err != nil {
				return err
			}
			name, runID := args[len(args)-1], ""
			if len(args) == 2 {
				runID = args[0]
			}
			if strings.TrimSpace(name) == "" {
				return errors.New("the signal NAME is empty")
			}
			return withBackend(cmd, g, backendOptions{limits: limits, wakeKeys: true}, func(ctx context.Context, b backend) error {
				var res *state.SignalResult
				var err error
				if runID != "" {
					r, rerr := resolveRun(ctx, b, runID)
					if rerr != nil {
						return rerr
					}
					runID = r.ID
					res, err = b.signal(ctx, runID, name, body)
				} else {
					res, err = b.signalKey(ctx, name, key, body)
				}
				switch {
				case errors.Is(err, starflowtype.ErrPayloadInvalid):
					return &exitError{code: exitBadPayload, msg: err.Error() + "; nothing was sent"}
				case errors.Is(err, starflowtype.ErrNotFound):
					return noRun(b, runID)
				case errors.Is(err, starflowtype.ErrConflict):
					return &exitError{code: 1, msg: fmt.Sprintf("run %s has ended; signal %q not delivered", runID, name)}
				case err != nil:
					return err
				}
				if w := res.Wait; w != nil {
					fmt.Printf("signal %s woke wait %s (step %s) of run %s\n", termSafe(name), w.ID, stepLabel(w), w.RunID)
					return nil
				}
				to := "run " + runID
				if runID == "" {
					to = "correlation key " + termSafe(key)
				}
				id := ""
				if res.Inbox != nil {
					id = " (inbox entry " + res.Inbox.ID + ")"
				}
				fmt.Printf("signal %s is held in the wake inbox for %s%s: no wait for it yet; it wakes the wait when it registers\n", termSafe(name), termSafe(to), id)
				if runID != "" {
					warnUnknownSignal(ctx, cmd, b, runID, name)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&payload, "payload", "", "the wake payload: JSON, or @FILE (default null)")
	cmd.Flags().StringVar(&key, "correlation-key", "", "address the wait by its correlation key instead of the run")
	lf.register(cmd, limitsPayload)
	return remoteCommand(cmd)
}

// stepLabel is a wait's step as scope/step.
func stepLabel(w *starflowtype.Wait) string {
	if w.ScopePath == "" {
		return termSafe(w.StepID)
	}
	return termSafe(w.ScopePath + "/" + w.StepID)
}

// warnUnknownSignal prints a warning on stderr when no wait step of the
// run's definition listens for signal name (a typo, most likely), naming
// the signals it does wait for. The signal stays held in the inbox (a later
// revision may wait for it); a definition that cannot be read or parsed
// here (a custom step type of another process) gives no warning, nor,
// through a server, a run on another revision than its workflow's
// current one (the API serves only that revision's spec).
func warnUnknownSignal(ctx context.Context, cmd *cobra.Command, b backend, runID, name string) {
	run, err := b.run(ctx, runID)
	if err != nil {
		return
	}
	row, err := b.definition(ctx, run)
	if err != nil {
		return
	}
	def, err := workflow.Parse(row.Name, row.Spec, workflow.ParseOptions{Limits: workflow.NoLimits(), Stored: true})
	if err != nil {
		return
	}
	names := waitSignalNames(def)
	if slices.Contains(names, name) {
		return
	}
	waits := "it waits for no signal"
	if len(names) > 0 {
		waits = "it waits for: " + strings.Join(names, ", ")
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: no wait step of run %s's definition %s waits for signal %q; %s\n",
		termSafe(runID), termSafe(row.Name), name, termSafe(waits))
}

// waitSignalNames lists, sorted and without repeats, the signal names the
// wait steps of def listen for, nested constructs included: wait.signal,
// and an approval's signal (default the step id). Timer waits have none.
func waitSignalNames(def *workflow.Definition) []string {
	var names []string
	def.Walk(func(s *workflow.Step, _ []*workflow.Step) bool {
		if s.Wait != nil {
			if n := s.Wait.SignalName(s.ID); n != "" {
				names = append(names, n)
			}
		}
		return true
	})
	slices.Sort(names)
	return slices.Compact(names)
}
