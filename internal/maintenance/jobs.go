package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Job sweep defaults (issue 15).
const (
	JobSweepIntervalDefault = time.Second
	JobSweepBatchDefault    = 500
)

// JobSweepConfig configures a JobSweep.
type JobSweepConfig struct {
	// Interval between passes. Default 1 s; one pass runs at Start.
	Interval time.Duration
	// BatchLimit is how many jobs one ExpireJobLeases call may change.
	// Default 500.
	BatchLimit int
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// OnRequeue, when set, is called after a pass ended jobs (their
	// parked runs were re-queued), to wake in-process runners at once.
	OnRequeue func()
}

// JobSweep recovers remote workers' jobs whose lease expired (a worker
// that died or stopped heartbeating): ExpireJobLeases queues each again
// as a lost try, or ends it failed with a timeout error when its step's
// retry policy has no try left for it, waking the run. Leases are compared
// with the database's clock; several sweeps may run at once (each job is
// changed in a transaction that re-checks its lease).
type JobSweep struct {
	store state.Jobs
	cfg   JobSweepConfig
	*periodic
}

// NewJobSweep returns a sweep over store.
func NewJobSweep(store state.Jobs, cfg JobSweepConfig) *JobSweep {
	if cfg.Interval <= 0 {
		cfg.Interval = JobSweepIntervalDefault
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = JobSweepBatchDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &JobSweep{store: store, cfg: cfg}
	s.periodic = newPeriodic("job sweep", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := s.Pass(ctx)
		return err
	})
	return s
}

// Pass expires every job lease that passed and returns the jobs it
// changed (queued again or failed); on error, what it changed so far.
func (s *JobSweep) Pass(ctx context.Context) ([]*starflowtype.WorkerJob, error) {
	var changed []*starflowtype.WorkerJob
	var err error
	for range maxBatchesPerPass {
		var batch []*starflowtype.WorkerJob
		batch, err = s.store.ExpireJobLeases(ctx, &state.ExpireJobLeasesParams{Limit: s.cfg.BatchLimit})
		changed = append(changed, batch...)
		if err != nil || len(batch) < s.cfg.BatchLimit || ctx.Err() != nil {
			break
		}
	}
	ended := false
	for _, j := range changed {
		s.cfg.Logger.Warn("job lease expired", "job_id", j.ID, "type", j.Type, "run_id", j.RunID, "step_id", j.StepID,
			"worker", j.LeasedBy, "tries", j.Tries, "max_tries", j.MaxTries, "status", j.Status)
		ended = ended || j.Status == starflowtype.JobFailed
	}
	if ended && s.cfg.OnRequeue != nil {
		s.cfg.OnRequeue()
	}
	return changed, err
}
