package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

func newPlanCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Show which in-flight runs could move onto a new revision, before applying it",
		Long: `Compare the definition in FILE with the stored revisions of its workflow and list the
in-flight runs (running, paused, interrupted) that could be resumed onto it — every step they
completed exists in FILE with the same kind — and those that could not, with the reason.
Nothing is written. With --server (or ` + envServer + `) the server plans it (any role).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("cannot read %s: %w", args[0], unwrapPathError(err))
			}
			var p *starflow.Plan
			err = withBackend(cmd, g, backendOptions{create: true}, func(ctx context.Context, b backend) error {
				p, err = b.plan(ctx, args[0], src)
				return err
			})
			if err != nil {
				return validationExit(err)
			}
			if asJSON {
				return printJSON(p)
			}
			switch {
			case p.CurrentRevision == "":
				fmt.Printf("%s: new workflow %s (revision %s); no runs yet\n", termSafe(args[0]), termSafe(p.Workflow), p.NewRevision[:12])
				return nil
			case !p.Changed:
				fmt.Printf("%s: %s revision %s is already current\n", termSafe(args[0]), termSafe(p.Workflow), p.NewRevision[:12])
			default:
				fmt.Printf("%s: %s revision %s → %s\n", termSafe(args[0]), termSafe(p.Workflow), p.CurrentRevision[:12], p.NewRevision[:12])
			}
			fmt.Printf("in-flight runs that can move onto it: %d; that cannot: %d\n", len(p.Movable), len(p.Blocked))
			tw := newTable(os.Stdout, "RUN", "STATUS", "REVISION", "CAN MOVE", "REASON")
			for _, r := range p.Movable {
				tw.row(r.RunID, string(r.Status), shortRevision(r.Revision), "yes", "")
			}
			for _, r := range p.Blocked {
				tw.row(r.RunID, string(r.Status), shortRevision(r.Revision), "no", short(strings.TrimSuffix(r.Reason, ": "+starflowtype.ErrRevisionMismatch.Error()), 100))
			}
			return tw.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return remoteCommand(cmd)
}
