package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// Sweeper is the hash-compare sweep of SPEC §8: for every run that is not
// terminal or finished within Config.WarmRetention, it hashes the cold run
// (Hash over the projection of workflow_runs and its current steps, with
// workflow_runs.mirror_version) and the warm entry, and writes the cold
// projection over a missing or divergent warm entry (PutRun force),
// counting starflow_warm_corrections_total{reason}. Runs with unapplied
// outbox rows are left to the drainer (their lag is the drift signal
// then). A run is compared only when its cold version was the same before
// and after reading it, so the repair is a consistent snapshot.
type Sweeper struct {
	cold state.Adapter
	ob   state.Outbox
	warm warm.Store
	cfg  Config
	met  *Metrics
}

// SweepResult counts one sweep.
type SweepResult struct {
	Checked  int // runs compared
	Skipped  int // runs with rows in flight or written during the check
	Missing  int // entries written because the warm store had none
	Diverged int // entries rewritten because their hash differed
}

// NewSweeper returns a sweeper comparing cold (whose outbox is ob) with
// cfg.Warm.
func NewSweeper(cold state.Adapter, ob state.Outbox, cfg Config, met *Metrics) *Sweeper {
	cfg = cfg.WithDefaults()
	if met == nil {
		met, _ = NewMetrics(nil)
	}
	return &Sweeper{cold: cold, ob: ob, warm: cfg.Warm, cfg: cfg, met: met}
}

// Run sweeps every Config.SweepInterval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	interval := s.cfg.SweepInterval
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("mirror: sweep", "err", err)
		}
	}
}

// SweepOnce runs one sweep over every run it covers, 500 runs a page. It
// stops at the first cold or warm error (the next sweep starts over).
func (s *Sweeper) SweepOnce(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	after := ""
	for {
		page, err := s.ob.MirrorRuns(ctx, &state.MirrorRunsParams{FinishedWithin: s.cfg.WarmRetention, AfterID: after, Limit: state.OutboxDefaultLimit})
		if err != nil {
			return res, err
		}
		for _, mr := range page {
			reason, err := s.check(ctx, mr)
			if err != nil {
				return res, err
			}
			res.add(reason)
		}
		if len(page) < state.OutboxDefaultLimit {
			break
		}
		after = page[len(page)-1].RunID
	}
	s.met.Sweeps.Inc()
	return res, nil
}

func (r *SweepResult) add(reason string) {
	switch reason {
	case "":
		r.Checked++
	case reasonSkipped:
		r.Skipped++
	case ReasonMissing:
		r.Checked++
		r.Missing++
	case ReasonDiverged:
		r.Checked++
		r.Diverged++
	}
}

const reasonSkipped = "skipped"

// reconcileStep is how often an end-of-run reconciliation looks whether
// the run's rows drained.
const reconcileStep = 50 * time.Millisecond

// check compares one run; returns "" (equal), reasonSkipped, or the
// correction reason.
func (s *Sweeper) check(ctx context.Context, mr *state.MirrorRun) (string, error) {
	if mr.Pending > 0 {
		return reasonSkipped, nil
	}
	run, err := s.cold.GetRun(ctx, &state.GetRunParams{ID: mr.RunID})
	if errors.Is(err, starflowtype.ErrNotFound) {
		return reasonSkipped, nil // deleted meanwhile
	}
	if err != nil {
		return "", err
	}
	steps, err := s.cold.ListSteps(ctx, &state.ListStepsParams{RunID: mr.RunID, Attempt: run.Attempt})
	if err != nil {
		return "", err
	}
	again, err := s.ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{mr.RunID}})
	if err != nil {
		return "", err
	}
	if len(again) != 1 || again[0].Version != mr.Version || again[0].Pending > 0 {
		return reasonSkipped, nil // written meanwhile: the drainer has it
	}
	want := RunEntry(run, CurrentSteps(steps, run.Attempt), mr.Version)
	got, err := s.warm.GetRun(ctx, mr.RunID)
	reason := ""
	switch {
	case errors.Is(err, warm.ErrNotFound):
		reason = ReasonMissing
	case err != nil:
		return "", fmt.Errorf("warm entry of run %s: %w", mr.RunID, err)
	case Hash(got) != want.Hash:
		reason = ReasonDiverged
	}
	if reason == "" {
		return "", nil
	}
	if _, err := s.warm.PutRun(ctx, want, true); err != nil {
		return "", fmt.Errorf("repair warm entry of run %s: %w", mr.RunID, err)
	}
	s.met.Corrections.WithLabelValues(reason).Inc()
	s.cfg.Logger.Info("mirror: repaired warm entry", "run_id", mr.RunID, "reason", reason, "version", mr.Version)
	return reason, nil
}

// Reconcile is the end-of-run check of one run: it waits (up to
// Config.ReconcileWait, nudging nothing) until the run's outbox rows are
// applied, then compares and repairs as the sweep does. Returns the
// correction reason ("" when the entry matched; "skipped" when the rows
// did not drain in time or the run kept changing).
func (s *Sweeper) Reconcile(ctx context.Context, runID string) (string, error) {
	deadline := time.Now().Add(s.cfg.ReconcileWait)
	// The run's last rows were committed just now: give the drainer one
	// pass before the first look.
	if !sleep(ctx, reconcileStep) {
		return "", ctx.Err()
	}
	for {
		mrs, err := s.ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{runID}})
		if err != nil {
			return "", err
		}
		if len(mrs) != 1 {
			return reasonSkipped, nil
		}
		if mrs[0].Pending == 0 {
			reason, err := s.check(ctx, mrs[0])
			if err != nil || reason != reasonSkipped || time.Now().After(deadline) {
				return reason, err
			}
		}
		if time.Now().After(deadline) {
			return reasonSkipped, nil
		}
		if !sleep(ctx, reconcileStep) {
			return "", ctx.Err()
		}
	}
}
