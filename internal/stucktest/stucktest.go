package stucktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// Case is one run in one state and what its reason must say.
type Case struct {
	// Name is the reason, with a suffix where a reason has two cases
	// ("retry_backoff/step", "retry_backoff/run").
	Name   string
	Reason starflowtype.StuckReason
	RunID  string
	// Check reports what is wrong with the reason's detail (nil: right).
	Check func(st *starflowtype.Stuck) error
}

// Fixture is the runs in their states and the engines that hold them
// there: Engine (the runner of the pool-less runs, and the maintenance
// leader, whose stuck watch refreshes the metrics every StuckInterval)
// and a second engine whose only runner slot a blocked run fills (the
// runner of pool "busy").
type Fixture struct {
	Store  state.Adapter
	Engine *starflow.Engine
	Busy   *starflow.Engine
	Cases  []*Case

	release chan struct{}
	once    sync.Once
}

// StuckInterval is how often the fixture's maintenance leader counts the
// stuck runs for the metrics.
const StuckInterval = 50 * time.Millisecond

// Pools of the fixture: busy is served by one runner whose slot is full;
// nobody is served by no runner; ghost is claimed only by the fixture
// itself (for a runner that then "dies").
const (
	PoolBusy   = "busy"
	PoolNobody = "nobody"
	PoolGhost  = "ghost"
	// KilledRunner is the runner that claimed the lease_stale run and
	// then vanished without a heartbeat.
	KilledRunner = "killed-runner"
)

const (
	wfSignal   = "name: stuck-signal\nsteps:\n  - id: ask\n    wait: {signal: go}\n"
	wfTimer    = "name: stuck-timer\nsteps:\n  - id: nap\n    wait: {timer: 1h}\n"
	wfApproval = "name: stuck-approval\nsteps:\n  - id: sign\n    wait: {approval: {signal: sign_off}}\n"
	wfChild    = "name: stuck-parent\nsteps:\n  - id: call\n    workflow_call: {workflow: stuck-signal}\n"
	wfJob      = "name: stuck-job\nsteps:\n  - id: convert\n    job: {type: nobody-serves}\n"
	wfStepTry  = "name: stuck-step-retry\nsteps:\n  - id: flaky\n    boom: {}\n    retry_policy: {max_attempts: 3, initial_interval: 1h, max_interval: 1h}\n"
	wfRunTry   = "name: stuck-run-retry\nmax_attempts: 3\nsteps:\n  - id: flaky\n    boom: {}\n    retry_policy: {max_attempts: 1}\n"
	wfBlock    = "name: stuck-block\nsteps:\n  - id: hold\n    block: {}\n"
	wfManual   = "name: stuck-manual\nrecovery_mode: manual\nsteps:\n  - id: a\n    context_set: {x: 1}\n"
)

// Options tune New.
type Options struct {
	// WakeKeys is the engines' wake-key ring (starflow.Config.WakeKeys):
	// required on PostgreSQL, which keeps no signing secret.
	WakeKeys string
}

// New puts the runs in their states on store (open and migrated; the
// caller closes it after the test) and returns once every run's reason is
// the one its case wants (or fails t after a minute). t.Cleanup stops the
// engines (their blocked steps released) before the store closes.
func New(t testing.TB, store state.Adapter, opts Options) *Fixture {
	t.Helper()
	f := &Fixture{Store: store, release: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	leading := make(chan struct{})
	var leadOnce sync.Once
	var err error
	// The busy engine first: its one slot is taken by a blocked run
	// before anything else is enqueued, so it claims nothing else.
	f.Busy, err = starflow.New(starflow.Config{Store: store, Logger: logger, Pools: []string{PoolBusy}, Concurrency: 1,
		RunnerID: "busy-runner", PollInterval: 20 * time.Millisecond, WakeKeys: opts.WakeKeys})
	if err != nil {
		t.Fatal(err)
	}
	f.Engine, err = starflow.New(starflow.Config{Store: store, Logger: logger, RunnerID: "main-runner",
		PollInterval: 20 * time.Millisecond, RunRetryMin: time.Hour, RunRetryMax: time.Hour,
		Maintenance: true, SweepInterval: time.Hour, StuckInterval: StuckInterval, WakeKeys: opts.WakeKeys,
		OnMaintenanceLeader: func(l bool) {
			if l {
				leadOnce.Do(func() { close(leading) })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*starflow.Engine{f.Busy, f.Engine} {
		f.register(t, e)
	}
	for _, src := range []string{wfSignal, wfTimer, wfApproval, wfChild, wfJob, wfStepTry, wfRunTry, wfBlock, wfManual} {
		if _, err := f.Engine.Apply(ctx, "stuck.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.stop)

	blocker := f.enqueue(t, ctx, "stuck-block", &starflow.EnqueueOptions{Pool: PoolBusy})
	// ctx bounds the setup; the engines run until t.Cleanup stops them
	// (Start's context ending would stop them at once).
	if err := f.Busy.Start(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	f.waitStep(t, ctx, blocker, "hold")
	if err := f.Engine.Start(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	select { // the boot sweep has begun before any lease expires
	case <-leading:
	case <-ctx.Done():
		t.Fatal("stucktest: the fixture's engine never became the maintenance leader")
	}

	add := func(name string, reason starflowtype.StuckReason, id string, check func(*starflowtype.Stuck) error) {
		f.Cases = append(f.Cases, &Case{Name: name, Reason: reason, RunID: id, Check: check})
	}
	signal := f.enqueue(t, ctx, "stuck-signal", nil)
	add("waiting_signal", starflowtype.StuckWaitingSignal, signal, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Signal == "go" && st.Detail.StepID == "ask", "signal %q step %q, want go at ask", st.Detail.Signal, st.Detail.StepID)
	})
	timer := f.enqueue(t, ctx, "stuck-timer", nil)
	add("waiting_timer", starflowtype.StuckWaitingTimer, timer, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Until.Sub(st.Since) > 59*time.Minute && st.Detail.StepID == "nap",
			"until %v since %v step %q, want an hour later at nap", st.Detail.Until, st.Since, st.Detail.StepID)
	})
	approval := f.enqueue(t, ctx, "stuck-approval", nil)
	add("waiting_approval", starflowtype.StuckWaitingApproval, approval, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Signal == "sign_off" && st.Detail.StepID == "sign", "signal %q step %q, want sign_off at sign", st.Detail.Signal, st.Detail.StepID)
	})
	parent := f.enqueue(t, ctx, "stuck-parent", nil)
	add("waiting_child", starflowtype.StuckWaitingChild, parent, func(st *starflowtype.Stuck) error {
		d := st.Detail
		return want(d.ChildRunID != "" && d.Child != nil && d.Child.Reason == starflowtype.StuckWaitingSignal && d.Child.Detail.Signal == "go",
			"child %q with reason %+v, want a child waiting for signal go", d.ChildRunID, d.Child)
	})
	job := f.enqueue(t, ctx, "stuck-job", nil)
	add("waiting_job", starflowtype.StuckWaitingJob, job, func(st *starflowtype.Stuck) error {
		d := st.Detail
		return want(d.JobType == "nobody-serves" && d.StepID == "convert" && strings.Contains(d.Message, "no worker has polled for job type nobody-serves"),
			"job type %q step %q message %q, want nobody-serves at convert, saying no worker polled", d.JobType, d.StepID, d.Message)
	})
	stepTry := f.enqueue(t, ctx, "stuck-step-retry", nil)
	add("retry_backoff/step", starflowtype.StuckRetryBackoff, stepTry, func(st *starflowtype.Stuck) error {
		d := st.Detail
		return want(d.StepID == "flaky" && d.Try == 2 && d.Attempt == 1 && d.NextAt.Sub(st.Since) > 30*time.Minute,
			"step %q try %d attempt %d next at %v (since %v), want try 2 of flaky about an hour later", d.StepID, d.Try, d.Attempt, d.NextAt, st.Since)
	})
	runTry := f.enqueue(t, ctx, "stuck-run-retry", nil)
	add("retry_backoff/run", starflowtype.StuckRetryBackoff, runTry, func(st *starflowtype.Stuck) error {
		d := st.Detail
		return want(d.StepID == "" && d.Attempt == 2 && d.NextAt.Sub(st.Since) > 30*time.Minute,
			"step %q attempt %d next at %v (since %v), want attempt 2 of the run about an hour later", d.StepID, d.Attempt, d.NextAt, st.Since)
	})
	noRunner := f.enqueue(t, ctx, "stuck-signal", &starflow.EnqueueOptions{Pool: PoolNobody})
	add("queued_no_runner", starflowtype.StuckQueuedNoRunner, noRunner, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Pool == PoolNobody, "pool %q, want %s", st.Detail.Pool, PoolNobody)
	})
	first := f.enqueue(t, ctx, "stuck-block", &starflow.EnqueueOptions{Pool: PoolBusy})
	behind := f.enqueue(t, ctx, "stuck-block", &starflow.EnqueueOptions{Pool: PoolBusy})
	add("queued_behind", starflowtype.StuckQueuedBehind, behind, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Position == 2 && st.Detail.OldestAhead == first && st.Detail.Pool == PoolBusy,
			"position %d behind %q (pool %q), want 2 behind %s", st.Detail.Position, st.Detail.OldestAhead, st.Detail.Pool, first)
	})
	cancelled := f.enqueue(t, ctx, "stuck-block", nil)
	f.waitStep(t, ctx, cancelled, "hold")
	if _, err := f.Engine.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	add("cancel_requested", starflowtype.StuckCancelRequested, cancelled, func(st *starflowtype.Stuck) error {
		return want(st.Detail.StepID == "hold" && st.Detail.Runner == "main-runner", "step %q runner %q, want hold on main-runner", st.Detail.StepID, st.Detail.Runner)
	})
	// A runner claims a manual-mode run and is lost; the sweep holds
	// the run for an operator. Then another claims a run and is lost
	// too, and no sweep has seen it yet.
	manual := f.enqueue(t, ctx, "stuck-manual", &starflow.EnqueueOptions{Pool: PoolGhost})
	f.claimAndDie(t, ctx, manual, -time.Second)
	if _, err := f.Engine.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	add("interrupted", starflowtype.StuckInterrupted, manual, func(st *starflowtype.Stuck) error {
		d := st.Detail
		return want(d.Cause == "runner_lost" && d.Mode == starflowtype.RecoveryManual && d.AttemptsLeft == 2 && d.Attempt == 1,
			"cause %q mode %q attempts left %d attempt %d, want runner_lost, manual, 2 left after attempt 1", d.Cause, d.Mode, d.AttemptsLeft, d.Attempt)
	})
	stale := f.enqueue(t, ctx, "stuck-signal", &starflow.EnqueueOptions{Pool: PoolGhost})
	f.claimAndDie(t, ctx, stale, staleTTL)
	add("lease_stale", starflowtype.StuckLeaseStale, stale, func(st *starflowtype.Stuck) error {
		return want(st.Detail.Runner == KilledRunner && !st.Detail.LastHeartbeat.IsZero(), "runner %q heartbeat %v, want %s's", st.Detail.Runner, st.Detail.LastHeartbeat, KilledRunner)
	})

	f.waitReasons(t, ctx)
	return f
}

// Case returns the case named name (nil when none).
func (f *Fixture) Case(name string) *Case {
	for _, c := range f.Cases {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Verify checks got, the reason some reader gave for c's run: its
// reason, its since, and its detail (c.Check). It returns what is wrong,
// or nil.
func (c *Case) Verify(got *starflowtype.Stuck) error {
	switch {
	case got == nil:
		return fmt.Errorf("%s: run %s has no reason, want %s", c.Name, c.RunID, c.Reason)
	case got.Reason != c.Reason:
		return fmt.Errorf("%s: run %s has reason %s (%s), want %s", c.Name, c.RunID, got.Reason, got.Detail.Message, c.Reason)
	case got.Since.IsZero() || got.Detail.Message == "":
		return fmt.Errorf("%s: run %s: since %v, message %q: want both", c.Name, c.RunID, got.Since, got.Detail.Message)
	}
	if err := c.Check(got); err != nil {
		return fmt.Errorf("%s: run %s: %w (message %q)", c.Name, c.RunID, err, got.Detail.Message)
	}
	return nil
}

// Counts are the runs per reason the fixture made: the cases, plus the
// child run the waiting_child case waits for (waiting_signal) and the
// run ahead of queued_behind (queued_behind too).
func (f *Fixture) Counts() map[starflowtype.StuckReason]int {
	out := map[starflowtype.StuckReason]int{}
	for _, c := range f.Cases {
		out[c.Reason]++
	}
	out[starflowtype.StuckWaitingSignal]++
	out[starflowtype.StuckQueuedBehind]++
	return out
}

// register adds the custom steps: boom always fails (retryably), block
// holds until the fixture stops.
func (f *Fixture) register(t testing.TB, e *starflow.Engine) {
	t.Helper()
	if err := e.RegisterStep("boom", func(context.Context, *step.Request) (any, error) {
		return nil, errors.New("boom: the service is down")
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.RegisterStep("block", func(ctx context.Context, _ *step.Request) (any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.release:
			return "released", nil
		}
	}); err != nil {
		t.Fatal(err)
	}
}

func (f *Fixture) enqueue(t testing.TB, ctx context.Context, name string, o *starflow.EnqueueOptions) string {
	t.Helper()
	r, err := f.Engine.Enqueue(ctx, name, nil, o)
	if err != nil {
		t.Fatalf("stucktest: enqueue %s: %v", name, err)
	}
	return r.ID
}

// waitStep waits until run id's step is running.
func (f *Fixture) waitStep(t testing.TB, ctx context.Context, id, stepID string) {
	t.Helper()
	for {
		steps, err := f.Store.ListSteps(ctx, &state.ListStepsParams{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.StepID == stepID && s.Status == starflowtype.StepRunning {
				return
			}
		}
		if !pause(ctx) {
			t.Fatalf("stucktest: step %s of run %s never ran", stepID, id)
		}
	}
}

// staleTTL is the lease of the run whose runner dies: it runs out soon
// after the claim, which is the runner's only heartbeat.
const staleTTL = 100 * time.Millisecond

// claimAndDie claims run id (of pool ghost) for KilledRunner with a lease
// of ttl (negative: one that has already run out), and starts it: a
// runner that died at once.
func (f *Fixture) claimAndDie(t testing.TB, ctx context.Context, id string, ttl time.Duration) {
	t.Helper()
	runs, err := f.Store.ClaimRuns(ctx, &state.ClaimRunParams{RunnerID: KilledRunner, Pools: []string{PoolGhost},
		LeaseTTL: ttl, RunID: id, Limit: 1, Start: true})
	if err != nil || len(runs) != 1 {
		t.Fatalf("stucktest: claim of %s for %s: %v, %v", id, KilledRunner, runs, err)
	}
}

// waitReasons waits until every case's run has its reason.
func (f *Fixture) waitReasons(t testing.TB, ctx context.Context) {
	t.Helper()
	runs := make([]*starflowtype.Run, len(f.Cases))
	for {
		for i, c := range f.Cases {
			r, err := f.Store.GetRun(ctx, &state.GetRunParams{ID: c.RunID})
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = r
		}
		got, err := f.Engine.StuckMany(ctx, runs)
		if err != nil {
			t.Fatal(err)
		}
		var wrong []string
		for _, c := range f.Cases {
			if err := c.Verify(got[c.RunID]); err != nil {
				wrong = append(wrong, err.Error())
			}
		}
		if len(wrong) == 0 {
			return
		}
		if !pause(ctx) {
			t.Fatalf("stucktest: the runs did not reach their states:\n%s", strings.Join(wrong, "\n"))
		}
	}
}

// stop releases the blocked steps and stops the engines (a short grace:
// the run between two tries sleeps for an hour and is cut off).
func (f *Fixture) stop() {
	f.once.Do(func() {
		close(f.release)
		for _, e := range []*starflow.Engine{f.Engine, f.Busy} {
			if e == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_ = e.Stop(ctx)
			cancel()
		}
	})
}

// Stop stops the fixture's engines now (t.Cleanup does it otherwise):
// the runs stay where they are in the store, but nothing holds them any
// more. Safe to call twice.
func (f *Fixture) Stop() { f.stop() }

// pause waits a little; false when ctx is done.
func pause(ctx context.Context) bool {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
