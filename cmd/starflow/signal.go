package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// readPayload validates a --payload value: JSON, or @FILE holding JSON.
// Empty means {}.
func readPayload(s string) (json.RawMessage, error) {
	if s == "" {
		return json.RawMessage(`{}`), nil
	}
	data, where := []byte(s), "--payload"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("cannot read payload file %s: %w", name, unwrapPathError(err))
		}
		data, where = b, "payload file "+name
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, &exitError{code: 2, msg: fmt.Sprintf("%s is not valid JSON: %s", where, jsonErrorText(data, err))}
	}
	return json.RawMessage(data), nil
}

func newSignalCmd(g *globalFlags) *cobra.Command {
	var payload, key string
	cmd := &cobra.Command{
		Use:   "signal [RUN] NAME",
		Short: "Send a named signal to a run's wait (or to the wait with a correlation key)",
		Long: `Send signal NAME with a JSON payload, the wake payload of the wait it wakes (the wait
step's output). Address it to a run:

  starflow signal RUN NAME --payload '{"approved": true}'

or, without knowing the run, by correlation key (the wait's correlation_key):

  starflow signal --correlation-key order-42 NAME --payload '{...}'

The oldest pending wait for NAME (of that run, or with that key) is woken and its run
re-queued, in one transaction. When no such wait exists yet — the run has not reached its
wait step — the signal is kept in the durable wake inbox and consumed when the wait
registers; it is never lost.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case key == "" && len(args) != 2:
				return fmt.Errorf("give RUN and NAME (or --correlation-key KEY and NAME); got %d arguments", len(args))
			case key != "" && len(args) != 1 && len(args) != 2:
				return fmt.Errorf("with --correlation-key give NAME (and optionally RUN before it); got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			body, err := readPayload(payload)
			if err != nil {
				return err
			}
			p := &state.SignalParams{WorkspaceID: state.DefaultWorkspace, CorrelationKey: key, Payload: body}
			if len(args) == 2 {
				p.RunID, p.Signal = args[0], args[1]
			} else {
				p.Signal = args[0]
			}
			if strings.TrimSpace(p.Signal) == "" {
				return errors.New("the signal NAME is empty")
			}
			store, err := g.openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			res, err := store.Signal(ctx, p)
			switch {
			case errors.Is(err, starflowtype.ErrNotFound):
				return &exitError{code: 1, msg: fmt.Sprintf("no run with id %q in this store", p.RunID)}
			case errors.Is(err, starflowtype.ErrConflict):
				return &exitError{code: 1, msg: fmt.Sprintf("run %s has ended; signal %q not delivered", p.RunID, p.Signal)}
			case err != nil:
				return err
			}
			if w := res.Wait; w != nil {
				fmt.Printf("signal %s woke wait %s (step %s) of run %s\n", p.Signal, w.ID, stepLabel(w), w.RunID)
				return nil
			}
			to := "run " + p.RunID
			if p.RunID == "" {
				to = "correlation key " + p.CorrelationKey
			}
			id := ""
			if res.Inbox != nil {
				id = " (inbox entry " + res.Inbox.ID + ")"
			}
			fmt.Printf("signal %s is held in the wake inbox for %s%s: no wait for it yet; it wakes the wait when it registers\n", p.Signal, to, id)
			return nil
		},
	}
	cmd.Flags().StringVar(&payload, "payload", "", "the wake payload: JSON, or @FILE (default {})")
	cmd.Flags().StringVar(&key, "correlation-key", "", "address the wait by its correlation key instead of (or as well as) the run")
	return cmd
}

// stepLabel is a wait's step as scope/step.
func stepLabel(w *starflowtype.Wait) string {
	if w.ScopePath == "" {
		return w.StepID
	}
	return w.ScopePath + "/" + w.StepID
}
