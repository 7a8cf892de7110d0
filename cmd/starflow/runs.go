package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

func newRunsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Inspect and steer runs: list, show, ledger, events, waits, resume, retrigger, cancel",
		Long: `Inspect and steer runs. ID is a run's id or a unique prefix of it, at least 8 hex digits
(an ambiguous prefix is refused, naming two runs it starts). Every subcommand but live
works on the store (--db, --store) or, with --server URL or ` + envServer + `, through that server's
HTTP API with the API key in ` + envAPIKey + ` (viewer reads; operator cancels and retriggers;
admin resumes), printing the same and exiting with the same status. A server sees only
the runs of its key's workspace (and env): another's run is "no run with id".`,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")

	var status []string
	var workflowName string
	var limit int
	var deadLetter bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Long: `List runs, newest first: ID, WORKFLOW, STATUS, ATTEMPT, CREATED, DURATION, STUCK (why an
unfinished run is not moving) and ERROR. --dead-letter lists the dead letters only: failed
runs whose attempts ran out (dead_lettered), which runs resume ID re-drives.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sts []starflowtype.RunStatus
			for _, s := range status {
				s = strings.TrimSpace(s)
				if err := checkEnum("status", s, runStatusValues, false); err != nil {
					return err
				}
				if deadLetter && s != string(starflowtype.RunFailed) {
					return usageError("--dead-letter lists failed runs only (dead letters are failed runs out of attempts): drop --status %s", s)
				}
				sts = append(sts, starflowtype.RunStatus(s))
			}
			if deadLetter {
				sts = []starflowtype.RunStatus{starflowtype.RunFailed}
			}
			var runs []*api.RunView
			err := withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) (err error) {
				runs, err = b.listRuns(ctx, &state.ListRunsParams{WorkflowName: workflowName, Status: sts, DeadLettered: deadLetter, Limit: limit})
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(orEmptySlice(runs))
			}
			tw := newTable(os.Stdout, "ID", "WORKFLOW", "STATUS", "ATTEMPT", "CREATED", "DURATION", "STUCK", "ERROR")
			for _, r := range runs {
				tw.row(r.ID, r.WorkflowName, string(r.Status), fmt.Sprint(r.Attempt), fmtTime(r.CreatedAt), runDuration(r.Run),
					stuckReason(r.Stuck), short(r.ErrorLine(), 60))
			}
			return tw.flush()
		},
	}
	list.Flags().StringSliceVar(&status, "status", nil, "only runs with these statuses (repeatable, or comma-separated): "+strings.Join(runStatusValues, ", "))
	list.Flags().StringVar(&workflowName, "workflow", "", "only runs of this workflow")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	list.Flags().BoolVar(&deadLetter, "dead-letter", false, "only dead letters: failed runs whose attempts ran out (GET /api/dead-letters through a server)")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRun(cmd, g, args[0], func(ctx context.Context, b backend, r *starflowtype.Run) error {
				stuck, err := b.stuck(ctx, r)
				if err != nil {
					return err
				}
				view := api.NewRunView(r, stuck)
				if asJSON {
					return printJSON(view)
				}
				tw := newTable(os.Stdout)
				rows := [][2]string{
					{"id", r.ID}, {"workflow", r.WorkflowName}, {"revision", r.WorkflowRevision},
					{"status", string(r.Status)}, {"claim_state", string(r.ClaimState)},
					{"attempt", fmt.Sprintf("%d of %d", r.Attempt, r.MaxAttempts)}, {"recovery_mode", string(r.RecoveryMode)},
					{"trigger", string(r.TriggerType)}, {"runner_pool", r.RunnerPool}, {"leased_by", r.LeasedBy},
					{"lease_epoch", fmt.Sprint(r.LeaseEpoch)}, {"lease_until", fmtTime(r.LeaseUntil)},
					{"created_at", fmtTime(r.CreatedAt)}, {"started_at", fmtTime(r.StartedAt)},
					{"attempt_started_at", fmtTime(r.AttemptStartedAt)},
					{"completed_at", fmtTime(r.CompletedAt)}, {"duration", runDuration(r)},
					{"phase", r.Phase}, {"dead_lettered", fmt.Sprint(r.DeadLettered)},
					{"input", compactJSON(r.Input)}, {"output", compactJSON(r.Output)}, {"error", view.ErrorLine()},
					{"error_type", errorType(view.Error)}, {"trace_id", r.TraceID},
				}
				if r.Status == starflowtype.RunPaused {
					// What it waits for, after claim_state.
					waits, err := b.waits(ctx, r.ID, 0, true)
					if err != nil {
						return err
					}
					var extra [][2]string
					for _, w := range waits {
						extra = append(extra, [2]string{"waiting", fmt.Sprintf("step %s: %s, since %s",
							stepLabel(w), waitsFor(w), fmtTime(w.CreatedAt))})
					}
					rows = append(rows[:5], append(extra, rows[5:]...)...)
				}
				if stuck != nil {
					// Why it does not move, right after its state.
					why := [][2]string{{"stuck", string(stuck.Reason) + " since " + fmtTime(stuck.Since)}, {"why", stuck.Detail.Message}}
					at := slices.IndexFunc(rows, func(kv [2]string) bool { return kv[0] == "attempt" })
					rows = append(rows[:at], append(why, rows[at:]...)...)
				}
				for _, kv := range rows {
					if kv[1] != "" {
						tw.row(kv[0]+":", kv[1])
					}
				}
				return tw.flush()
			})
		},
	}

	var attempt int
	ledger := &cobra.Command{
		Use:   "ledger ID",
		Short: "Show a run's step ledger (workflow_steps) and checkpoint count",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRun(cmd, g, args[0], func(ctx context.Context, b backend, r *starflowtype.Run) error {
				steps, err := b.steps(ctx, r.ID, attempt)
				if err != nil {
					return err
				}
				cps, err := b.checkpoints(ctx, r.ID, attempt)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(map[string]any{"run": api.NewRunView(r, nil), "steps": orEmptySlice(steps), "checkpoints": orEmptySlice(cps)})
				}
				fmt.Printf("run %s  %s  %s  attempt %d\n", r.ID, termSafe(r.WorkflowName), r.Status, r.Attempt)
				tw := newTable(os.Stdout, "ATTEMPT", "SCOPE", "STEP", "KIND", "STATUS", "TRIES", "DURATION", "ERROR")
				succeeded := 0
				for _, s := range steps {
					scope := s.ScopePath
					if scope == "" {
						scope = "-"
					}
					tw.row(fmt.Sprint(s.Attempt), scope, s.StepID, s.Kind, string(s.Status), fmt.Sprint(s.Tries), fmtMS(s.DurationMS), short(s.Error, 60))
					if s.Status == starflowtype.StepSucceeded {
						succeeded++
					}
				}
				if err := tw.flush(); err != nil {
					return err
				}
				fmt.Printf("checkpoints: %d (succeeded steps: %d)\n", len(cps), succeeded)
				return nil
			})
		},
	}
	ledger.Flags().IntVar(&attempt, "attempt", 0, "only this attempt (default: every attempt)")

	var after int64
	events := &cobra.Command{
		Use:   "events ID",
		Short: "Show a run's events (workflow_run_events) in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRun(cmd, g, args[0], func(ctx context.Context, b backend, r *starflowtype.Run) error {
				evs, err := b.events(ctx, r.ID, after)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(orEmptySlice(evs))
				}
				tw := newTable(os.Stdout, "ID", "TIME", "ATTEMPT", "EVENT", "STEP", "SCOPE", "PAYLOAD")
				for _, e := range evs {
					tw.row(fmt.Sprint(e.ID), fmtTime(e.CreatedAt), fmt.Sprint(e.Attempt), string(e.Type), e.NodeID, e.ScopePath, short(string(e.Payload), 80))
				}
				return tw.flush()
			})
		},
	}
	events.Flags().Int64Var(&after, "after", 0, "only events with an id greater than this")

	for _, c := range []*cobra.Command{list, show, ledger, events} {
		cmd.AddCommand(remoteCommand(c))
	}
	cmd.AddCommand(newRunsLiveCmd(&asJSON), newRunsWaitsCmd(g, &asJSON))
	cmd.AddCommand(operatorCmds(g)...)
	return cmd
}

// withRun opens cmd's backend (a store must exist), reads the run id (or
// a unique prefix of it) names and calls fn.
func withRun(cmd *cobra.Command, g *globalFlags, id string, fn func(ctx context.Context, b backend, r *starflowtype.Run) error) error {
	return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
		r, err := resolveRun(ctx, b, id)
		if err != nil {
			return err
		}
		return fn(ctx, b, r)
	})
}

func printJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := os.Stdout.Write(jsonSafe(buf.Bytes()))
	return err
}

// compactJSON is a stored JSON value on one line (an input given as a
// file keeps its line breaks in the store).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func orEmptySlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cols ...string) {
	for i := range cols {
		cols[i] = termSafe(cols[i])
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// stuckReason is a run's why-stuck reason for a table, "-" when none.
func stuckReason(st *starflowtype.Stuck) string {
	if st == nil {
		return "-"
	}
	return string(st.Reason)
}

// runDuration is the run's duration once it ended, "-" before.
func runDuration(r *starflowtype.Run) string {
	if r.CompletedAt.IsZero() {
		return "-"
	}
	return fmtMS(r.DurationMS)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func fmtMS(ms int64) string {
	if ms == 0 {
		return "0s"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// errorType is a typed error's type, with its status (http) and its
// cause's type (child_failed): "http 404", "child_failed ← OutOfStock".
func errorType(e *starflowtype.ErrorInfo) string {
	if e == nil {
		return ""
	}
	s := e.Type
	if e.Status != 0 {
		s += fmt.Sprintf(" %d", e.Status)
	}
	for c := e.Cause; c != nil; c = c.Cause {
		s += " ← " + c.Type
	}
	return s
}

func short(s string, n int) string {
	s = oneLine(s)
	if len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
