package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Defaults of Config (SPEC §5).
const (
	LeaseTTLDefault     = 30 * time.Second
	HeartbeatDefault    = 10 * time.Second
	PollIntervalDefault = 200 * time.Millisecond
	ConcurrencyDefault  = 8
	// heartbeatTimeoutFraction: one heartbeat call may take at most this
	// fraction of the TTL, well under it.
	heartbeatTimeoutFraction = 3
	// selfStopMarginFraction: the runner stops a run TTL/10 before its
	// lease could expire, i.e. 0.9 × TTL after the last successful claim
	// or renewal was sent.
	selfStopMarginFraction = 10
)

// MaxHeartbeat is the longest heartbeat interval allowed with lease TTL
// ttl: half of it. The runner stops a run 0.9 × TTL after it sent the
// last renewal that succeeded, so a heartbeat of at most TTL/2 leaves
// 0.4 × TTL in which a failed renewal is retried (every
// min(Heartbeat, TTL/10)) before the run is given up.
func MaxHeartbeat(ttl time.Duration) time.Duration { return ttl / 2 }

// Config configures a Runner.
type Config struct {
	// ID is the runner identity written to leased_by. Default NewID().
	ID string
	// Pools are the runner pools this runner serves; runs with no pool are
	// always eligible. Default none.
	Pools []string
	// Workspace limits claims to one workspace; "" = any.
	Workspace string
	// OnlyRun limits claims to that run and the runs descending from it
	// (its child runs, parent_run_id chain; "" = any run). `starflow run`
	// executes only its own run and its children this way, on the same
	// claim path.
	OnlyRun string
	// LeaseTTL is how long a claim or heartbeat holds the lease. Default
	// 30 s.
	LeaseTTL time.Duration
	// Heartbeat is the lease refresh interval, measured from the moment
	// the last successful claim or renewal was sent. Default 10 s, or
	// LeaseTTL/3 when 10 s is more than half of LeaseTTL; at most
	// MaxHeartbeat(LeaseTTL) (half the TTL).
	Heartbeat time.Duration
	// PollInterval is how often an idle runner looks for work when no
	// signal arrives. Default 200 ms.
	PollInterval time.Duration
	// Concurrency is the most runs executed at once. Default 8.
	Concurrency int
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// OnFinish, when set, is called after each run execution ends (any
	// outcome). Used to wake waiters in-process.
	OnFinish func(runID string, outcome engine.Outcome)
	// Metrics receives claims, lease refreshes and lease losses (see
	// Metrics). Default nil: none.
	Metrics *Metrics
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.ID == "" {
		c.ID = NewID()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = LeaseTTLDefault
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = HeartbeatDefault
		if c.Heartbeat > MaxHeartbeat(c.LeaseTTL) {
			c.Heartbeat = c.LeaseTTL / 3
		}
	}
	if c.PollInterval == 0 {
		c.PollInterval = PollIntervalDefault
	}
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a configuration error: a duration that is not
// positive, a heartbeat longer than half the lease TTL, a concurrency
// below 1.
func (c Config) Validate() error {
	if c.LeaseTTL <= 0 || c.Heartbeat <= 0 || c.PollInterval <= 0 {
		return fmt.Errorf("runner: lease TTL (%s), heartbeat (%s) and poll interval (%s) must be positive", c.LeaseTTL, c.Heartbeat, c.PollInterval)
	}
	if err := CheckHeartbeat(c.LeaseTTL, c.Heartbeat); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("runner: concurrency must be at least 1")
	}
	return nil
}

// CheckHeartbeat refuses a heartbeat longer than MaxHeartbeat(ttl), with
// a message giving the largest allowed value and the reason.
func CheckHeartbeat(ttl, heartbeat time.Duration) error {
	if heartbeat > MaxHeartbeat(ttl) {
		return fmt.Errorf("heartbeat %s is more than half the lease TTL %s: a run is stopped %s (0.9 × TTL) after its last renewal was sent, so a heartbeat must leave time to retry a failed renewal; use a heartbeat of at most %s or a lease TTL of at least %s",
			heartbeat, ttl, ttl-ttl/selfStopMarginFraction, MaxHeartbeat(ttl), 2*heartbeat)
	}
	return nil
}

// NewID returns a runner identity: host, pid and a random suffix
// ("build-7:4242:9f2c1a").
func NewID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Runner claims and executes runs. Start it once; Stop it once (a second
// Stop is a no-op).
type Runner struct {
	cfg    Config
	store  state.Adapter
	engine *engine.Engine

	wake chan struct{}

	mu       sync.Mutex
	started  bool
	stopping bool
	shutdown bool          // Stop cancelled the runs in flight
	drain    chan struct{} // closed when Stop begins: runs stop at their next step boundary
	cancel   context.CancelFunc
	inflight map[string]context.CancelCauseFunc
	loopDone chan struct{}
	runs     sync.WaitGroup

	presenceCancel context.CancelFunc
	presenceDone   chan struct{}
}

// New returns a runner.
func New(store state.Adapter, eng *engine.Engine, cfg Config) (*Runner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, store: store, engine: eng, wake: make(chan struct{}, 1), drain: make(chan struct{}),
		inflight: map[string]context.CancelCauseFunc{}}, nil
}

// Stopping is closed when Stop begins (runs in flight then stop at their
// next step boundary).
func (r *Runner) Stopping() <-chan struct{} { return r.drain }

// ID is the runner's identity.
func (r *Runner) ID() string { return r.cfg.ID }

// Pools are the runner pools this runner serves (a copy).
func (r *Runner) Pools() []string { return append([]string(nil), r.cfg.Pools...) }

// Held is the number of runs this runner holds right now (claimed and not
// yet finished or released): what its presence publishes as runs held.
func (r *Runner) Held() int { return r.inflightCount() }

// Notify tells the runner new work may be available (the in-process
// signal of SPEC §5); it never blocks.
func (r *Runner) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start begins claiming in the background and returns at once.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("runner: already started")
	}
	r.started = true
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	r.presenceCancel, r.presenceDone = pcancel, make(chan struct{})
	go r.presence(pctx)
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.loopDone = make(chan struct{})
	go r.loop(ctx)
	return nil
}

// Stop stops claiming, waits for runs in flight to finish until ctx is
// done (the grace period), then cancels the rest with engine.ErrShutdown so
// they release their leases, and waits for them to do so — at most
// ReleaseWait more; runs whose handlers ignore cancellation are then left
// to the lease sweep and Stop returns an error naming how many.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started || r.stopping {
		r.mu.Unlock()
		return nil
	}
	r.stopping = true
	r.cancel()
	close(r.drain) // runs in flight stop at their next step boundary
	r.mu.Unlock()
	<-r.loopDone
	defer r.gone(ctx) // once its runs are done (or left to the sweep)

	done := make(chan struct{})
	go func() { r.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.mu.Lock()
	r.shutdown = true // runs registered from now on are cancelled at once
	for _, cancel := range r.inflight {
		cancel(engine.ErrShutdown)
	}
	n := len(r.inflight)
	r.mu.Unlock()
	t := time.NewTimer(ReleaseWait)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("runner: %d of %d runs did not stop within %s of their cancellation; their leases expire and the sweep recovers them", r.inflightCount(), n, ReleaseWait)
	}
}

// ReleaseWait bounds how long Stop waits for cancelled runs to release
// their leases.
const ReleaseWait = 10 * time.Second

// presence keeps the runner's workflow_runners row (state.Watchdog) live:
// written at once and then every Heartbeat, each live for LeaseTTL, so
// the cold store can tell a queue no live runner serves from one that
// waits its turn. A failed write is logged once until one succeeds again,
// never fatal: the row then expires and its runs read queued_no_runner.
func (r *Runner) presence(ctx context.Context) {
	defer close(r.presenceDone)
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	failing := false
	for {
		hctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL/heartbeatTimeoutFraction)
		err := r.store.RunnerSeen(hctx, &state.RunnerSeenParams{RunnerID: r.cfg.ID, WorkspaceID: r.cfg.Workspace,
			Pools: r.cfg.Pools, OnlyRun: r.cfg.OnlyRun, Concurrency: r.cfg.Concurrency, RunsHeld: r.Held(), TTL: r.cfg.LeaseTTL})
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			r.cfg.Logger.Warn("runner presence not written to the store; retrying every heartbeat", "error", err)
			failing = true
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gone stops the presence and removes the runner's row (a clean stop), at
// most goneTimeout after ctx is done.
func (r *Runner) gone(ctx context.Context) {
	r.presenceCancel()
	<-r.presenceDone
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneTimeout)
	defer cancel()
	if err := r.store.RunnerGone(gctx, r.cfg.ID); err != nil {
		r.cfg.Logger.Warn("runner presence not removed from the store; it expires after the lease TTL", "error", err)
	}
}

// goneTimeout bounds the removal of the runner's row at Stop.
const goneTimeout = 5 * time.Second

func (r *Runner) inflightCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// register records a claimed run's cancel function before its goroutine
// starts, so Stop can always reach it; after a shutdown it cancels at once.
func (r *Runner) register(id string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight[id] = cancel
	if r.shutdown {
		cancel(engine.ErrShutdown)
	}
}

func (r *Runner) loop(ctx context.Context) {
	defer close(r.loopDone)
	slots := make(chan struct{}, r.cfg.Concurrency)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		// Every slot free now is filled by the same claim (one statement).
		free := 1
		for free < r.cfg.Concurrency && r.cfg.OnlyRun == "" {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		// The claim is not cut off by Stop: a claim that committed must be
		// seen, so its runs are executed or released, never left claimed.
		claimStart := time.Now() // the lease runs from no earlier than this
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL)
		runs, err := r.store.ClaimRuns(cctx, &state.ClaimRunParams{RunnerID: r.cfg.ID, Pools: r.cfg.Pools, LeaseTTL: r.cfg.LeaseTTL,
			WorkspaceID: r.cfg.Workspace, RunID: r.cfg.OnlyRun, WithDescendants: true, Limit: free, Start: true})
		ccancel()
		r.cfg.Metrics.claimed(runs, err, time.Since(claimStart), r.cfg.LeaseTTL)
		for range free - len(runs) {
			<-slots
		}
		if err != nil || len(runs) == 0 {
			if err != nil && ctx.Err() == nil {
				r.cfg.Logger.Warn("claim failed", "error", err)
			}
			timer.Reset(r.cfg.PollInterval)
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
			case <-timer.C:
			}
			continue
		}
		for _, run := range runs {
			rctx, cancel := context.WithCancelCause(engine.WithDrain(context.Background(), r.drain))
			r.register(run.ID, cancel)
			if ctx.Err() != nil {
				cancel(engine.ErrShutdown) // claimed while stopping: release it at once
			}
			r.runs.Add(1)
			go func() {
				defer func() { <-slots; r.runs.Done() }()
				r.execute(rctx, cancel, run, claimStart)
			}()
		}
	}
}

// execute runs one claimed run under its lease.
func (r *Runner) execute(ctx context.Context, cancel context.CancelCauseFunc, run *starflowtype.Run, claimStart time.Time) {
	lease := run.Lease()
	log := r.cfg.Logger.With("run_id", run.ID, "workflow", run.WorkflowName, "attempt", run.Attempt, "lease_epoch", lease.Epoch)
	defer cancel(nil)
	defer func() {
		r.mu.Lock()
		delete(r.inflight, run.ID)
		r.mu.Unlock()
	}()

	outcome := engine.OutcomeLeaseLost
	defer func() {
		if r.cfg.OnFinish != nil {
			r.cfg.OnFinish(run.ID, outcome)
		}
	}()

	// The claim started the run (ClaimRunParams.Start): OnRunStart's
	// write was made with it.
	started := run
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		r.heartbeat(ctx, cancel, run.ID, lease, claimStart, log)
	}()
	outcome, err := r.engine.Execute(ctx, started, lease)
	r.cfg.Metrics.executed(ctx, outcome, err)
	cancel(nil)
	<-hbDone
	if err != nil {
		log.Warn("run stopped", "outcome", outcome, "error", err)
	}
	r.Notify() // a slot is free; a retry may be due
}

// heartbeat renews the lease until ctx ends. The lease the database
// holds ends TTL after the last successful claim or renewal statement ran,
// which is no earlier than the moment this runner sent it; so the runner's
// own deadline is measured on its monotonic clock from that moment
// (validFrom for the claim): the run is cancelled with ErrLeaseLost
// 0.9 × TTL after it, whatever the heartbeat is doing (a renewal may hang
// up to its own timeout), so that no step keeps working — calling
// services — once another runner could have claimed the run. Each
// successful renewal moves the deadline to 0.9 × TTL after the moment it
// was sent. Renewals are sent Heartbeat after the last successful one was
// sent; a failed one is retried every min(Heartbeat, TTL/10) until the
// deadline. When the store says the lease is lost, the run is cancelled at
// once.
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, runID string, lease starflowtype.Lease, validFrom time.Time, log *slog.Logger) {
	ttl := r.cfg.LeaseTTL
	hold := ttl - ttl/selfStopMarginFraction
	retry := min(r.cfg.Heartbeat, ttl/selfStopMarginFraction)
	expired := func() {
		log.Warn("lease not renewed in time; stopping run before it expires", "lease_ttl", ttl)
		cancel(fmt.Errorf("lease not renewed within %s: %w", hold, starflowtype.ErrLeaseLost))
	}
	deadline := validFrom.Add(hold)
	expiry := time.AfterFunc(time.Until(deadline), expired)
	defer expiry.Stop()
	next := time.NewTimer(time.Until(validFrom.Add(r.cfg.Heartbeat)))
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		sent := time.Now()
		hctx, hcancel := context.WithTimeout(ctx, ttl/heartbeatTimeoutFraction)
		_, err := r.store.RefreshLease(hctx, &state.RefreshLeaseParams{RunID: runID, Lease: lease, LeaseTTL: ttl})
		hcancel()
		r.cfg.Metrics.refreshed(ctx, err)
		switch {
		case err == nil:
			if !expiry.Stop() {
				return // the deadline passed first and cancelled the run
			}
			deadline = sent.Add(hold)
			expiry.Reset(time.Until(deadline))
			next.Reset(time.Until(sent.Add(r.cfg.Heartbeat)))
		case errors.Is(err, starflowtype.ErrLeaseLost):
			// Debug only: a renewal racing the run's own end finds the lease
			// already released. A real loss is logged where the execution
			// stops ("lease lost; abandoning run").
			log.Debug("lease renewal refused; cancelling run", "error", err)
			cancel(starflowtype.ErrLeaseLost)
			return
		case ctx.Err() != nil:
			return
		default:
			log.Warn("heartbeat failed; retrying", "error", err, "retry_in", retry, "stop_in", time.Until(deadline).Round(time.Millisecond))
			next.Reset(retry)
		}
	}
}
