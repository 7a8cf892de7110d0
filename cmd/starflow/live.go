package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/natskv"
	"github.com/starflow/starflow/warm/warmopen"
)

// liveRunView is what `runs live` prints: the warm entry and its progress.
type liveRunView struct {
	Run      *warm.RunEntry   `json:"run"`
	Progress []*warm.Progress `json:"progress"`
}

// newRunsLiveCmd is `starflow runs live ID`: a run as the warm tier shows
// it (live status, current steps, progress), which may lag the cold store.
func newRunsLiveCmd(asJSON *bool) *cobra.Command {
	var spec string
	cmd := &cobra.Command{
		Use:   "live ID",
		Short: "Show a run as the warm tier shows it (live status, current steps, progress); may lag `runs show`",
		Long: `Reads the warm tier named by --warm or STARFLOW_WARM (nats://HOST:PORT, or embedded with
--warm-dir), never the cold store: the answer may lag "starflow runs show", which is
authoritative. A memory warm tier lives inside its process: ask that process's
GET /live/runs/ID instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("warm") {
				spec = strings.TrimSpace(os.Getenv(envWarm))
			}
			switch {
			case spec == "" || spec == warmNone:
				return fmt.Errorf("no warm tier given: use --warm nats://HOST:PORT or set %s", envWarm)
			case spec == "memory":
				return errors.New("--warm memory lives inside the process that runs it: ask its listener (curl http://127.0.0.1:8480/live/runs/ID)")
			case spec != "embedded" && !strings.HasPrefix(spec, "nats://") && !strings.HasPrefix(spec, "tls://"):
				return usageError("--warm %q is not a valid value: use one of embedded, nats://HOST:PORT (or tls://HOST:PORT)", spec)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			dir, _ := cmd.Flags().GetString("warm-dir")
			ws, err := warmopen.Open(ctx, spec, warmopen.Options{DataDir: dir})
			if err != nil {
				return err
			}
			defer ws.Close()
			e, err := ws.GetRun(ctx, args[0])
			if errors.Is(err, warm.ErrNotFound) {
				return fmt.Errorf("run %s is not in the warm tier (%s); runs show reads the cold store", args[0], natskv.Redacted(spec))
			}
			if err != nil {
				return fmt.Errorf("warm tier %s: %w", natskv.Redacted(spec), err)
			}
			ps, err := ws.ListProgress(ctx, args[0])
			if err != nil {
				return fmt.Errorf("warm tier %s: %w", natskv.Redacted(spec), err)
			}
			if *asJSON {
				if ps == nil {
					ps = []*warm.Progress{}
				}
				return printJSON(liveRunView{Run: e, Progress: ps})
			}
			tw := newTable(os.Stdout)
			for _, r := range [][2]string{
				{"id", e.RunID}, {"workflow", e.WorkflowName}, {"status", e.Status}, {"claim_state", e.ClaimState},
				{"phase", e.Phase}, {"attempt", fmt.Sprint(e.Attempt)}, {"leased_by", e.LeasedBy},
				{"version", fmt.Sprint(e.Version)}, {"updated_at", fmtTime(e.UpdatedAt)}, {"error", e.Error},
			} {
				tw.row(r[0], r[1])
			}
			for _, s := range e.CurrentSteps {
				tw.row("current step", strings.TrimPrefix(s.ScopePath+"/"+s.StepID, "/")+" "+s.Status)
			}
			for _, p := range ps {
				tw.row("progress", fmt.Sprintf("%s %.0f%% %s", strings.TrimPrefix(p.ScopePath+"/"+p.StepID, "/"), p.Fraction*100, p.Message))
			}
			return tw.flush()
		},
	}
	cmd.Flags().StringVar(&spec, "warm", "", "warm tier to read: nats://HOST:PORT or embedded (env "+envWarm+")")
	cmd.Flags().String("warm-dir", "./starflow.warm", "data directory of --warm embedded (stop the process that runs it first)")
	return cmd
}
