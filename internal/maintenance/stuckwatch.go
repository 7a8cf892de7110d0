package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Stuck watch defaults.
const (
	// StuckIntervalDefault is how often the stuck watch counts.
	StuckIntervalDefault = 15 * time.Second
)

// StuckAgeBuckets are the default upper bounds, in seconds, of the age
// histogram of stuck runs: 10 s to a week.
var StuckAgeBuckets = []float64{10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}

// StuckWatchConfig configures a StuckWatch.
type StuckWatchConfig struct {
	// Interval between passes. Default 15 s. One pass also runs at Start.
	Interval time.Duration
	// Buckets are the upper bounds of the age bins in seconds, ascending.
	// Default StuckAgeBuckets.
	Buckets []float64
	// OnPass is called with each pass's tally, and with nil when the
	// watch stops (a process that no longer leads exports nothing).
	// Required.
	OnPass func(*StuckTally)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// StuckTally is one count of every unfinished run by stuck reason: for
// each of starflowtype.StuckReasons (every one present, zero when no run
// has it), how many runs, their ages binned by Buckets, and the sum of
// their ages.
type StuckTally struct {
	// Buckets are the bins' upper bounds in seconds (as configured).
	Buckets []float64
	Reasons map[starflowtype.StuckReason]*ReasonTally
}

// ReasonTally is the runs of one reason: Count of them, Bins[i] of them
// younger than Buckets[i] (and at least Buckets[i-1]; the last bin holds
// the older ones, len(Buckets)+1 bins), AgeSum seconds in all.
type ReasonTally struct {
	Count  int64
	Bins   []int64
	AgeSum float64
}

// StuckWatch counts the unfinished runs by stuck reason from the cold
// store (one StuckCounts aggregate and the live runners, per pass) for
// the watchdog metrics starflow_runs_stuck{reason} and
// starflow_runs_stuck_age_seconds{reason}. Its cost follows the number of
// unfinished runs (the status index), not the size of the table; it runs
// in the maintenance leader only.
type StuckWatch struct {
	store state.Watchdog
	cfg   StuckWatchConfig
	*periodic
}

// NewStuckWatch returns a stuck watch over store.
func NewStuckWatch(store state.Watchdog, cfg StuckWatchConfig) *StuckWatch {
	if cfg.Interval <= 0 {
		cfg.Interval = StuckIntervalDefault
	}
	if len(cfg.Buckets) == 0 {
		cfg.Buckets = StuckAgeBuckets
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnPass == nil {
		cfg.OnPass = func(*StuckTally) {}
	}
	w := &StuckWatch{store: store, cfg: cfg}
	w.periodic = newPeriodic("stuck watch", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		t, err := w.Pass(ctx)
		if err != nil {
			return err
		}
		cfg.OnPass(t)
		return nil
	})
	return w
}

// Stop stops the watch and reports a nil tally to OnPass.
func (w *StuckWatch) Stop(ctx context.Context) error {
	err := w.periodic.Stop(ctx)
	w.cfg.OnPass(nil)
	return err
}

// Pass counts now.
func (w *StuckWatch) Pass(ctx context.Context) (*StuckTally, error) {
	counts, err := w.store.StuckCounts(ctx, &state.StuckCountsParams{Buckets: w.cfg.Buckets})
	if err != nil {
		return nil, err
	}
	var runners []*starflowtype.Runner
	for _, c := range counts {
		if c.Class == state.ClassQueued {
			if runners, err = w.store.ListRunners(ctx, &state.ListRunnersParams{Live: true}); err != nil {
				return nil, err
			}
			break
		}
	}
	t := &StuckTally{Buckets: w.cfg.Buckets, Reasons: map[starflowtype.StuckReason]*ReasonTally{}}
	for _, r := range starflowtype.StuckReasons() {
		t.Reasons[r] = &ReasonTally{Bins: make([]int64, len(w.cfg.Buckets)+1)}
	}
	for _, c := range counts {
		reason := state.ClassReason(c.Class)
		if c.Class == state.ClassQueued {
			reason = QueuedReason(runners, c.WorkspaceID, c.Pool)
		}
		rt := t.Reasons[reason]
		if rt == nil {
			continue // a class this version does not know
		}
		rt.Count += c.Count
		rt.AgeSum += c.AgeSum
		rt.Bins[min(max(c.Bucket, 0), len(rt.Bins)-1)] += c.Count
	}
	return t, nil
}

// QueuedReason is the reason of a claimable run of workspace and pool:
// queued_behind when one of runners (the live ones) serves it, else
// queued_no_runner.
func QueuedReason(runners []*starflowtype.Runner, workspace, pool string) starflowtype.StuckReason {
	for _, r := range runners {
		if r.Serves(workspace, pool) {
			return starflowtype.StuckQueuedBehind
		}
	}
	return starflowtype.StuckQueuedNoRunner
}
