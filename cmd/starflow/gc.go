package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
)

func newGCCmd(g *globalFlags) *cobra.Command {
	var (
		ret    retentionFlags
		dryRun bool
		asJSON bool
		noVars bool
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove what is older than the retention ages now (--dry-run: only count it)",
		Long: `Remove, from the local store (--db or STARFLOW_STORE; not through --server), what is
older than the retention ages (database clock), in small batches that never hold a lock a
runner waits on, and print what went by kind:

  - ended runs with their steps, events, checkpoints, waits, wake-inbox rows, worker jobs
    and idempotency receipts: succeeded ones after --retain-succeeded (7d), failed and
    cancelled ones after --retain-failed (30d), runs held for an operator (interrupted in
    recovery mode manual, dead-lettered) after --retain-held (90d). A definition's
    retention: {succeeded: 1d, failed: 7d} overrides the first two for its workflow while it
    is the current revision. Runs that have not ended are never removed; a child run goes
    only with its parent, and a parent only once all its descendants ended;
  - blobs no checkpoint references any more (untouched for an hour);
  - consumed waits and wake-inbox rows after --retain-consumed (7d), of runs that stay,
    when no step reads them any more;
  - mirror_outbox rows applied more than an hour ago; expired idempotency receipts;
  - expired session variables (what the session GC does every minute).

--dry-run counts what would go and removes nothing. --gc-throttle 1 makes gc wait, after
each batch, as long as the batch took (default 0: no wait). Ages are days (7d, 1d12h) or Go
durations (36h), or never. "starflow server", "dev" and "worker" run the same pass every
--retention-interval (1h) while they lead maintenance, with the same flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, err := g.openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			eng, err := starflow.New(starflow.Config{Store: store, Logger: g.logger(os.Stderr), NoRunner: true})
			if err != nil {
				return err
			}
			p := ret.p
			p.DryRun, p.SessionVars = dryRun, !noVars
			rep, err := eng.CollectGarbage(ctx, p)
			if asJSON {
				if jerr := json.NewEncoder(os.Stdout).Encode(struct {
					DryRun bool `json:"dry_run"`
					state.GCReport
				}{dryRun, rep}); jerr != nil && err == nil {
					err = jerr
				}
			} else {
				printGCReport(rep, dryRun)
			}
			if err != nil {
				return fmt.Errorf("gc: %w (the counts above were removed before the error)", err)
			}
			return nil
		},
	}
	ret.register(cmd, false)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be removed, remove nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts as one JSON object")
	cmd.Flags().BoolVar(&noVars, "keep-session-vars", false, "leave expired session variables to the session GC")
	return cmd
}

// printGCReport prints a report: one line per kind with a count, or a line
// saying nothing was due.
func printGCReport(rep state.GCReport, dryRun bool) {
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	if rep.Total() == 0 {
		if dryRun {
			fmt.Println("gc: dry run: nothing is due")
		} else {
			fmt.Println("gc: nothing was due")
		}
		return
	}
	var parts []string
	for _, k := range rep.Kinds() {
		if k.Count > 0 {
			name := strings.ReplaceAll(strings.Replace(k.Name, "_vars", "_variables", 1), "_", " ")
			if k.Count == 1 {
				name = strings.TrimSuffix(name, "s")
			}
			parts = append(parts, fmt.Sprintf("%d %s", k.Count, name))
		}
	}
	prefix := "gc:"
	if dryRun {
		prefix = "gc: dry run:"
	}
	fmt.Printf("%s %s %s\n", prefix, verb, strings.Join(parts, ", "))
}
