package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/starflowtype"
)

// newRunsWaitsCmd is `runs waits RUN`; asJSON is the runs --json flag.
func newRunsWaitsCmd(g *globalFlags, asJSON *bool) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "waits ID",
		Short: "List a run's durable waits (workflow_waits), oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRun(cmd, g, args[0], func(ctx context.Context, b backend, r *starflowtype.Run) error {
				waits, err := b.waits(ctx, r.ID, limit, false)
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(orEmptySlice(waits))
				}
				fmt.Printf("run %s  %s  %s (%s)\n", r.ID, termSafe(r.WorkflowName), r.Status, r.ClaimState)
				tw := newTable(os.Stdout, "ID", "ATTEMPT", "STEP", "KIND", "SIGNAL", "STATUS", "WAKE_AT", "EXPIRES_AT", "CONSUMED_AT")
				for _, w := range waits {
					sig := w.Signal
					if w.CorrelationKey != "" {
						sig += " [" + w.CorrelationKey + "]"
					}
					tw.row(w.ID, fmt.Sprint(w.Attempt), stepLabel(w), string(w.Kind), dash(sig), string(w.Status),
						dash(fmtTime(w.WakeAt)), dash(fmtTime(w.ExpiresAt)), dash(fmtTime(w.ConsumedAt)))
				}
				return tw.flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many waits")
	return remoteCommand(cmd)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
