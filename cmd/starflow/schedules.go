package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
)

// scheduleBackend is what the schedules commands need of a backend;
// both backends implement it.
type scheduleBackend interface {
	// schedules lists the schedules (of workflow when set) with next
	// next fire times, and the time they are read against.
	schedules(ctx context.Context, workflow string, next int) ([]*starflow.Schedule, time.Time, error)
	// pauseSchedules pauses (paused) or resumes a workflow's schedules
	// (ErrNotFound: no such workflow).
	pauseSchedules(ctx context.Context, workflow string, paused bool) ([]*starflow.Schedule, error)
}

func (l *localBackend) schedules(ctx context.Context, workflow string, next int) ([]*starflow.Schedule, time.Time, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	list, err := eng.Schedules(ctx, workflow, next)
	return list, time.Now().UTC(), err
}

func (l *localBackend) pauseSchedules(ctx context.Context, workflow string, paused bool) ([]*starflow.Schedule, error) {
	eng, err := l.engine(ctx)
	if err != nil {
		return nil, err
	}
	if paused {
		return eng.PauseSchedules(ctx, workflow)
	}
	return eng.ResumeSchedules(ctx, workflow)
}

func (r *remoteBackend) schedules(ctx context.Context, workflow string, next int) ([]*starflow.Schedule, time.Time, error) {
	list, err := r.c.Schedules(ctx, workflow, next)
	if err != nil {
		return nil, time.Time{}, r.fail(err)
	}
	return list.Schedules, list.Now, nil
}

func (r *remoteBackend) pauseSchedules(ctx context.Context, workflow string, paused bool) ([]*starflow.Schedule, error) {
	c := r.c.ResumeSchedules
	if paused {
		c = r.c.PauseSchedules
	}
	list, err := c(ctx, workflow)
	if err != nil {
		return nil, r.fail(err)
	}
	return list.Schedules, nil
}

// newSchedulesCmd is `starflow schedules list|pause|resume`.
func newSchedulesCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List workflow schedules with their next fire times; pause and resume them",
		Long: `A definition's schedules (schedules: [{cron, timezone, input, overlap, catchup}]) start a run
at every tick, exactly once across every process that runs maintenance on the store
(trigger_type schedule). Applying a new revision replaces the workflow's schedules; a pause
is per workflow and outlives new revisions. See "Schedules" in docs/operations.md.`,
	}
	cmd.AddCommand(newSchedulesListCmd(g), newSchedulesPauseCmd(g, true), newSchedulesPauseCmd(g, false))
	return cmd
}

func newSchedulesListCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	var workflow string
	next := starflow.ScheduleNextDefault
	cmd := &cobra.Command{
		Use:   "list [--workflow NAME] [--next N] [--json]",
		Short: "List schedules: cron, timezone, overlap, catchup, state, next fire times, last tick and run",
		Long: `List the schedules of the workflows' current revisions by workflow and index (#): CRON,
TZ, OVERLAP, CATCHUP, STATE (active or paused), NEXT (the next --next fire times, UTC; none
while paused), LAST TICK (the newest tick handled: fired, or skipped by overlap or catchup)
and LAST RUN (the run the schedule started last).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if next < 1 || next > starflow.ScheduleNextMax {
				return usageError("--next must be 1 to %d, not %d", starflow.ScheduleNextMax, next)
			}
			return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
				list, _, err := b.(scheduleBackend).schedules(ctx, workflow, next)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(orEmptySlice(list))
				}
				printSchedules(list)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().StringVar(&workflow, "workflow", "", "only the schedules of this workflow")
	cmd.Flags().IntVar(&next, "next", next, "how many next fire times to show (1 to "+strconv.Itoa(starflow.ScheduleNextMax)+")")
	return remoteCommand(cmd)
}

func printSchedules(list []*starflow.Schedule) {
	if len(list) == 0 {
		fmt.Fprintln(os.Stderr, "no schedules (a definition declares them with schedules: [{cron: …}])")
		return
	}
	tw := newTable(os.Stdout, "WORKFLOW", "#", "CRON", "TZ", "OVERLAP", "CATCHUP", "STATE", "NEXT", "LAST TICK", "LAST RUN")
	for _, s := range list {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		var next []string
		for _, t := range s.NextFireTimes {
			next = append(next, t.UTC().Format("2006-01-02 15:04:05Z"))
		}
		last := ""
		if !s.LastTickAt.IsZero() {
			last = s.LastTickAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		tw.row(s.Workflow, strconv.Itoa(s.Index), s.Cron, s.Timezone, s.Overlap, s.Catchup, state,
			dash(strings.Join(next, ", ")), dash(last), dash(s.LastRunID))
	}
	_ = tw.flush()
}

func newSchedulesPauseCmd(g *globalFlags, paused bool) *cobra.Command {
	verb, short, long := "resume", "Resume a workflow's schedules; ticks missed while paused never fire",
		`Resume the schedules of WORKFLOW: the next tick after now fires; ticks that fell due while
it was paused never do (no catchup).`
	if paused {
		verb, short, long = "pause", "Pause a workflow's schedules: no tick fires until resumed",
			`Pause the schedules of WORKFLOW: no tick fires (no run, whatever catchup says) until
starflow schedules resume WORKFLOW. The pause is per workflow: it covers revisions applied
meanwhile, and a workflow without schedules can be paused ahead of one that adds them.`
	}
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withBackend(cmd, g, backendOptions{}, func(ctx context.Context, b backend) error {
				list, err := b.(scheduleBackend).pauseSchedules(ctx, args[0], paused)
				if isNotFound(err) {
					return &exitError{code: 1, msg: fmt.Sprintf("no workflow %q %s (apply it first)", args[0], b.where())}
				}
				if err != nil {
					return err
				}
				done := "resumed"
				if paused {
					done = "paused"
				}
				fmt.Fprintf(os.Stderr, "%s the schedules of %s (%d)\n", done, args[0], len(list))
				printSchedules(list)
				return nil
			})
		},
	}
	return remoteCommand(cmd)
}
