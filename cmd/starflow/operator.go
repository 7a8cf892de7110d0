package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// operatorCmds are `runs resume|retrigger|cancel`.
func operatorCmds(g *globalFlags) []*cobra.Command {
	act := func(cmd *cobra.Command, fn func(ctx context.Context, b backend, runID string) (*starflowtype.Run, error)) error {
		return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
			run, err := resolveRun(ctx, b, cmd.Flags().Arg(0))
			if err != nil {
				return err
			}
			r, err := fn(ctx, b, run.ID)
			if err != nil {
				if perr := pausedRefusal(ctx, b, cmd.Name(), run.ID, err); perr != nil {
					return perr
				}
				return operatorError(err, b)
			}
			fmt.Printf("run %s %s (attempt %d)\n", r.ID, describe(r), r.Attempt)
			return nil
		})
	}
	var mode, revision string
	resume := &cobra.Command{
		Use:   "resume ID",
		Short: "Queue a new attempt of a stopped run (interrupted, failed or cancelled)",
		Long: `Queue a new attempt of a run that stopped. With --mode resume (the default) every step
that committed a checkpoint is restored instead of executed; with --mode replay the run
starts over. --revision current moves the run onto the newest applied revision, allowed
only when every step it completed exists there with the same kind. A worker executes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEnum("mode", mode, resumeModeValues, false); err != nil {
				return err
			}
			if err := checkEnum("revision", revision, revisionValues, false); err != nil {
				return err
			}
			return act(cmd, func(ctx context.Context, b backend, id string) (*starflowtype.Run, error) {
				return b.resume(ctx, id, &starflow.ResumeOptions{Mode: starflowtype.RecoveryMode(mode), Revision: revision})
			})
		},
	}
	resume.Flags().StringVar(&mode, "mode", "resume", "resume (restore committed steps) or replay (start over)")
	resume.Flags().StringVar(&revision, "revision", starflow.RevisionPinned, "pinned (the run's revision) or current (the newest applied)")
	retrigger := &cobra.Command{
		Use:   "retrigger ID",
		Short: "Queue a new attempt of a run that is not executing, replayed from the first step",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return act(cmd, func(ctx context.Context, b backend, id string) (*starflowtype.Run, error) {
				return b.retrigger(ctx, id)
			})
		},
	}
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run (a running run stops at its next step boundary)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return act(cmd, func(ctx context.Context, b backend, id string) (*starflowtype.Run, error) {
				return b.cancel(ctx, id)
			})
		},
	}
	return []*cobra.Command{remoteCommand(resume), remoteCommand(retrigger), remoteCommand(cancel)}
}

// pausedRefusal is the answer of `runs resume|retrigger` to a run that
// is paused at a durable wait (the store refuses to re-queue it, nothing
// changed): where it waits and how to wake or cancel it, exit 1. nil when
// the refused action had another cause, or for cancel.
func pausedRefusal(ctx context.Context, b backend, action, runID string, err error) error {
	if action == "cancel" || errors.Is(err, starflowtype.ErrNotFound) {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	r, gerr := b.run(ctx, runID)
	if gerr != nil || r.Status != starflowtype.RunPaused {
		return nil
	}
	waits, _ := b.waits(ctx, r.ID, 0, true)
	how := "wake it with starflow signal or starflow wake"
	if len(waits) > 0 {
		how = wakeHow(r.ID, waits[0], b.arg())
	}
	only := map[string]string{"resume": "resumed (only an interrupted, failed or cancelled run can)",
		"retrigger": "retriggered (only an interrupted, failed, cancelled or succeeded run can)"}[action]
	return &exitError{code: 1, msg: fmt.Sprintf("run %s is %s, so it cannot be %s; %s, or cancel it: starflow runs cancel %s%s",
		r.ID, pausedAt(waits), only, how, r.ID, b.arg())}
}

func describe(r *starflowtype.Run) string {
	if r.CancelRequested && !r.Status.Terminal() {
		return "will stop at its next step boundary (cancel requested)"
	}
	return "is " + string(r.Status)
}

// operatorError words the sentinel errors of operator actions for people.
func operatorError(err error, b backend) error {
	switch {
	case errors.Is(err, starflowtype.ErrNotFound):
		return fmt.Errorf("no such run %s (%s)", b.where(), plainError(err, starflowtype.ErrNotFound))
	case errors.Is(err, starflowtype.ErrNoCheckpoint):
		// The server's answer names its body field (api.NoCheckpointHint);
		// here the flag is the way out.
		msg := strings.TrimSuffix(plainError(err, starflowtype.ErrNoCheckpoint), api.NoCheckpointHint)
		return &exitError{code: 1, msg: "no_checkpoint: " + msg + "; resume it with --mode replay to start it from the first step"}
	case errors.Is(err, starflowtype.ErrRevisionMismatch):
		return &exitError{code: 1, msg: "revision_mismatch: " + plainError(err, starflowtype.ErrRevisionMismatch)}
	case errors.Is(err, starflowtype.ErrConflict):
		return &exitError{code: 1, msg: plainError(err, starflowtype.ErrConflict)}
	}
	return err
}

// plainError is err's text for people: on one line, without the store's
// "sqlitestore: op: " prefix and the sentinel's ": conflict" suffix (the
// HTTP API words its answers the same way: state.Message).
func plainError(err, sentinel error) string { return state.Message(err, sentinel) }
