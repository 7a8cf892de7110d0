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
// projection over a missing or divergent warm entry, counting
// starflow_warm_corrections_total{reason}: with PutRun's version
// compare-and-set when the warm entry is missing or older, forced only
// over an entry at the same version or ahead, followed by a re-read of
// the cold version so that a newer version the drainer applied meanwhile
// is written back (never an older version over a newer one). An entry
// the store refuses as invalid (warm.ErrInvalid, e.g. too large) is
// logged and counted as skipped; the sweep goes on. Runs with unapplied
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
func (s *Sweeper) Run(ctx context.Context) { s.RunEvery(ctx, s.cfg.SweepInterval) }

// RunEvery sweeps every interval until ctx ends (at once when interval is
// not positive). The first sweep comes one interval after the call.
func (s *Sweeper) RunEvery(ctx context.Context, interval time.Duration) {
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
		got, reason = nil, ReasonMissing
	case err != nil:
		return "", fmt.Errorf("warm entry of run %s: %w", mr.RunID, err)
	case Hash(got) != want.Hash:
		reason = ReasonDiverged
	}
	if reason == "" {
		return "", nil
	}
	wrote, err := s.repair(ctx, mr, want, got)
	if errors.Is(err, warm.ErrInvalid) {
		// The store refuses the entry itself (e.g. larger than its
		// maximum): retrying cannot help, and the other runs still need
		// their check. The drainer skipped (and counted) the same row.
		s.cfg.Logger.Error("mirror: warm store refused the repaired entry", "run_id", mr.RunID, "reason", reason, "err", err)
		return reasonSkipped, nil
	}
	if err != nil {
		return "", fmt.Errorf("repair warm entry of run %s: %w", mr.RunID, err)
	}
	if !wrote {
		return reasonSkipped, nil // a newer version landed meanwhile: the drainer's
	}
	s.met.Corrections.WithLabelValues(reason).Inc()
	s.cfg.Logger.Info("mirror: repaired warm entry", "run_id", mr.RunID, "reason", reason, "version", mr.Version)
	return reason, nil
}

// repair writes want (the cold projection at version mr.Version) over the
// warm entry got (nil when missing) without ever leaving an older version
// over a newer one the drainer applied meanwhile. When got is missing or
// older than want, the version compare-and-set of PutRun (no force) does
// it: a newer entry written since the warm read wins, and repair reports
// wrote false. Only an entry at want's version or beyond (the same
// version with other content, or ahead of cold) needs the forced write;
// and since the drainer may have applied a newer version between the cold
// read and that write, the run's cold version is read again afterwards:
// if it moved on, the current cold projection is written with the
// compare-and-set, so warm ends at the newest version. (A version
// committed after that re-read reaches warm through its own outbox row,
// which the drainer applies after the forced write.)
func (s *Sweeper) repair(ctx context.Context, mr *state.MirrorRun, want, got *warm.RunEntry) (bool, error) {
	if got == nil || got.Version < want.Version {
		return s.warm.PutRun(ctx, want, false)
	}
	if _, err := s.warm.PutRun(ctx, want, true); err != nil {
		return false, err
	}
	now, err := s.snapshot(ctx, mr.RunID)
	if err != nil || now == nil || now.Version == want.Version {
		// Unchanged, deleted, or changing right now (its rows will come).
		return true, err
	}
	if _, err := s.warm.PutRun(ctx, now, false); err != nil {
		return true, fmt.Errorf("write version %d after the forced repair at %d: %w", now.Version, want.Version, err)
	}
	return true, nil
}

// snapshot is the current cold projection of run id, or nil when the run
// is gone or its version changed while it was read.
func (s *Sweeper) snapshot(ctx context.Context, runID string) (*warm.RunEntry, error) {
	before, err := s.ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{runID}})
	if err != nil || len(before) != 1 {
		return nil, err
	}
	run, err := s.cold.GetRun(ctx, &state.GetRunParams{ID: runID})
	if errors.Is(err, starflowtype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	steps, err := s.cold.ListSteps(ctx, &state.ListStepsParams{RunID: runID, Attempt: run.Attempt})
	if err != nil {
		return nil, err
	}
	after, err := s.ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{runID}})
	if err != nil || len(after) != 1 || after[0].Version != before[0].Version {
		return nil, err
	}
	return RunEntry(run, CurrentSteps(steps, run.Attempt), after[0].Version), nil
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
