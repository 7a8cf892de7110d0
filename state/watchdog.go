package state

import (
	"context"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Watchdog is what the "why is it stuck?" answers and their metrics read
// from the cold store (issue 13), and where runners say they are alive:
// the workflow_runners table, the stuck class of given runs, the head of
// a queue, and the stuck classes of every unfinished run counted. Every
// Adapter implements it. Times come from the database clock.
type Watchdog interface {
	// RunnerSeen upserts the runner's workflow_runners row: its
	// workspace, pools, concurrency and runs held, last_seen = now and
	// expires_at = now + p.TTL (started_at set on insert). In the same
	// transaction it removes rows that expired more than RunnerForget
	// ago. A runner calls it at start and on every heartbeat tick.
	RunnerSeen(ctx context.Context, p *RunnerSeenParams) error
	// RunnerGone removes the runner's row (a clean stop). A row that does
	// not exist is not an error.
	RunnerGone(ctx context.Context, runnerID string) error
	// ListRunners lists runners by id: with p.Live only those whose
	// expires_at has not passed; with p.WorkspaceID only those that claim
	// from it (their workspace is it, or every workspace).
	ListRunners(ctx context.Context, p *ListRunnersParams) ([]*starflowtype.Runner, error)

	// RunsStuck reads the stuck class of each run of p.RunIDs that exists
	// (one statement; ids that are not uuids are skipped), in no order.
	RunsStuck(ctx context.Context, p *RunsStuckParams) ([]*StuckRow, error)
	// QueueHead lists up to p.Limit (default QueuePositionMax + 1)
	// claimable runs (claim_state queued, available_at passed) of one
	// workspace, env and pool, in claim order (priority descending, then
	// available_at, then insertion): the first is the next to be claimed.
	QueueHead(ctx context.Context, p *QueueHeadParams) ([]*QueuedRun, error)
	// StuckCounts counts every unfinished run by stuck class (one
	// aggregate statement over the unfinished statuses of each
	// workspace, served by the status index), with the ages of the runs
	// in each class binned by p.Buckets. The queued class is counted per
	// workspace and pool (to tell runs no runner serves from runs that
	// wait their turn); the others are totals.
	StuckCounts(ctx context.Context, p *StuckCountsParams) ([]*StuckCount, error)
	// QueueDepths counts the claimable runs (claim_state queued,
	// available_at passed) by runner pool, with the age of the oldest
	// (one aggregate statement over the claim index; database clock).
	// Pools with no claimable run are absent; the order is unspecified.
	QueueDepths(ctx context.Context, p *QueueDepthsParams) ([]*QueueDepth, error)
}

// RunnerForget is how long after its expiry a runner's row is kept
// (health pages may show recently lost runners); RunnerSeen removes older
// ones.
const RunnerForget = time.Hour

// RunnerSeenParams is one runner's heartbeat.
type RunnerSeenParams struct {
	RunnerID    string
	WorkspaceID string   // "" = every workspace
	Pools       []string // the pools it serves
	OnlyRun     string   // the one run it executes, "" = any
	Concurrency int
	RunsHeld    int
	// TTL is how long the row counts as live without another heartbeat
	// (the runner's lease TTL). Required, positive.
	TTL time.Duration
}

// ListRunnersParams filters ListRunners.
type ListRunnersParams struct {
	WorkspaceID string // "" = any
	Live        bool
}

// RunsStuckParams names the runs RunsStuck reads.
type RunsStuckParams struct {
	RunIDs []string
}

// Stuck classes: what the store can decide on its own about an
// unfinished run (StuckRow.Class, StuckCount.Class). The engine maps
// each to a starflowtype.StuckReason: the waiting_* classes and
// lease_stale, cancel_requested and interrupted are reasons as they are;
// ClassRetryStep and ClassRetryRun are retry_backoff; ClassDelayed is
// waiting_timer; ClassQueued is queued_no_runner or queued_behind,
// depending on the live runners (starflowtype.Runner.Serves).
const (
	ClassNone            = ""            // running, with a fresh lease; or ended
	ClassLeaseStale      = "lease_stale" // held, lease_until passed
	ClassCancelRequested = "cancel_requested"
	ClassWaitingSignal   = "waiting_signal"
	ClassWaitingTimer    = "waiting_timer"
	ClassWaitingApproval = "waiting_approval"
	ClassWaitingChild    = "waiting_child"
	ClassWaitingJob      = "waiting_job"
	ClassRetryStep       = "retry_step" // held, a step between two tries
	ClassRetryRun        = "retry_run"  // interrupted, queued, available later
	ClassDelayed         = "delayed"    // queued, available later (a delayed enqueue)
	ClassQueued          = "queued"     // queued and claimable now
	ClassInterrupted     = "interrupted"
)

// StuckRow is one run's stuck class and the columns its reason's detail
// is made of, read in one statement (so they agree with each other).
// Zero values mean NULL.
type StuckRow struct {
	RunID       string
	WorkspaceID string
	Env         string
	Pool        string
	Status      starflowtype.RunStatus
	Class       string    // one of the Class* constants
	Since       time.Time // when the run entered the class (zero for ClassNone)

	Attempt       int
	MaxAttempts   int
	RecoveryMode  starflowtype.RecoveryMode
	Error         string
	LeasedBy      string
	LastHeartbeat time.Time
	AvailableAt   time.Time

	// The oldest pending wait of the current attempt (paused runs).
	WaitKind      starflowtype.WaitKind
	WaitSignal    string
	WaitKey       string // correlation key: a child wait's child run id
	WaitStepID    string
	WaitScopePath string
	WaitWakeAt    time.Time
	WaitExpiresAt time.Time

	// An open step of the current attempt (held runs): one between two
	// tries when there is one, else the one written last.
	StepID        string
	StepScopePath string
	StepTries     int
	// RetryAt is when the step's last node_retry was written, RetryBackoff
	// its backoff (ClassRetryStep): the next try is due at their sum.
	RetryAt      time.Time
	RetryBackoff time.Duration
}

// QueueHeadParams names a queue.
type QueueHeadParams struct {
	WorkspaceID string
	Env         string
	Pool        string // "" = runs with no pool
	Limit       int    // default starflowtype.QueuePositionMax + 1
}

// QueuedRun is one claimable run of a queue.
type QueuedRun struct {
	ID          string
	Priority    int
	AvailableAt time.Time
	CreatedAt   time.Time
}

// StuckCountsParams configure StuckCounts.
type StuckCountsParams struct {
	// Buckets are the upper bounds of the age bins, in seconds,
	// ascending; a run whose age is at least Buckets[i-1] and below
	// Buckets[i] is in bin i (bin 0: below Buckets[0]; bin len(Buckets):
	// at least the last).
	Buckets []float64
}

// StuckCount is the number of unfinished runs of one class (of one
// workspace and pool for ClassQueued; "" otherwise) whose age falls in
// bin Bucket, and the sum of their ages in seconds.
type StuckCount struct {
	Class       string
	WorkspaceID string
	Pool        string
	Bucket      int
	Count       int64
	AgeSum      float64
}

// ClassReason is the reason a stuck class stands for (see the Class*
// constants): "" for ClassNone, and for ClassQueued, which is
// queued_no_runner or queued_behind depending on the live runners.
func ClassReason(class string) starflowtype.StuckReason {
	switch class {
	case ClassRetryStep, ClassRetryRun:
		return starflowtype.StuckRetryBackoff
	case ClassDelayed:
		return starflowtype.StuckWaitingTimer
	case ClassNone, ClassQueued:
		return ""
	}
	if r := starflowtype.StuckReason(class); r.Valid() {
		return r
	}
	return ""
}

// QueueDepthsParams filter QueueDepths.
type QueueDepthsParams struct {
	// WorkspaceID limits the count to one workspace; "" = every
	// workspace (the runs of one pool in every workspace counted together).
	WorkspaceID string
}

// QueueDepth is the claimable runs of one runner pool: how many, and how
// long the oldest of them has been claimable.
type QueueDepth struct {
	Pool  string // "" = runs with no pool (any runner may claim them)
	Count int64
	// OldestAgeSeconds is now − the oldest run's available_at, in
	// seconds (database clock; never negative).
	OldestAgeSeconds float64
}
