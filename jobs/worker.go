package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/starflowtype"
)

// Defaults and bounds of Options.
const (
	// ConcurrencyDefault is Options.Concurrency when not set: jobs run at
	// once.
	ConcurrencyDefault = 10
	// PollWaitDefault is Options.PollWait when not set: the longest
	// long-poll the server allows (api.JobPollWaitMax seconds).
	PollWaitDefault = api.JobPollWaitMax * time.Second
	// ShutdownGraceDefault is Options.ShutdownGrace when not set.
	ShutdownGraceDefault = 30 * time.Second
	// WorkerIDMax is the longest Options.WorkerID, in bytes.
	WorkerIDMax = 200
)

// Delays of the poll loop after a poll failed (the server unreachable, a
// 5xx, a 429): exponential from pollRetryMin to pollRetryMax, jittered.
const (
	pollRetryMin = 100 * time.Millisecond
	pollRetryMax = 5 * time.Second
)

// ErrLeaseLost is the cause (context.Cause) of a handler's context
// cancelled because the worker no longer holds the job: the server
// refused a heartbeat (409: another claim holds it, or the run ended or
// was cancelled; 404: the job is gone) or no heartbeat got through within
// 0.9 × the job's heartbeat_timeout. It is starflowtype.ErrLeaseLost,
// which the client's job calls wrap on a 409 too.
var ErrLeaseLost = starflowtype.ErrLeaseLost

// ErrShutdown is the cause (context.Cause) of a handler's context
// cancelled because Run's context was done and Options.ShutdownGrace
// passed before the handler returned. The job is not reported: its lease
// expires and the server queues it again (a try).
var ErrShutdown = errors.New("jobs: the worker is shutting down and the shutdown grace passed")

// Options configures a Worker. Zero fields take their defaults.
type Options struct {
	// WorkerID names this worker to the server (the job's leased_by):
	// 1 to WorkerIDMax bytes. Default "<hostname>:<pid>".
	WorkerID string
	// Concurrency is how many jobs run at once; the worker polls only
	// while it has room for one more. Default ConcurrencyDefault (10); at
	// least 1.
	Concurrency int
	// PollWait is how long one poll waits on the server for a job to
	// arrive (a long-poll), sent in whole seconds (rounded up). Default
	// PollWaitDefault (30 s); between 1 s and 30 s. The client's HTTP
	// timeout must be longer.
	PollWait time.Duration
	// ShutdownGrace is how long jobs still running when Run's context is
	// done may go on before their contexts are cancelled (cause
	// ErrShutdown). Default ShutdownGraceDefault (30 s); negative cancels
	// them at once.
	ShutdownGrace time.Duration
	// Logger receives the worker's log (polls that failed, heartbeats
	// that failed, jobs that were lost, handlers that panicked). Default
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns o with its zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.WorkerID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		o.WorkerID = host + ":" + strconv.Itoa(os.Getpid())
		if len(o.WorkerID) > WorkerIDMax {
			o.WorkerID = o.WorkerID[len(o.WorkerID)-WorkerIDMax:]
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = ConcurrencyDefault
	}
	if o.PollWait == 0 {
		o.PollWait = PollWaitDefault
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = ShutdownGraceDefault
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports what is wrong with o (after WithDefaults): a worker id
// over WorkerIDMax bytes, a concurrency below 1, a poll wait outside 1 s
// to 30 s.
func (o Options) Validate() error {
	switch {
	case o.WorkerID == "" || len(o.WorkerID) > WorkerIDMax:
		return fmt.Errorf("jobs: Options.WorkerID must be 1 to %d bytes, got %d", WorkerIDMax, len(o.WorkerID))
	case o.Concurrency < 1:
		return fmt.Errorf("jobs: Options.Concurrency must be at least 1, got %d", o.Concurrency)
	case o.PollWait < 0 || o.PollWait > PollWaitDefault:
		return fmt.Errorf("jobs: Options.PollWait must be between 1s and %s (the server's longest long-poll), got %s", PollWaitDefault, o.PollWait)
	}
	return nil
}

// Worker serves job types of one Starflow server. Register handlers with
// Handle, then call Run. Safe for concurrent use.
type Worker struct {
	c    *client.Client
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]handlerFunc
	running  bool
}

// NewWorker returns a worker that calls the server through c (whose key
// needs role worker or admin; its workspace bounds which jobs it sees).
// Errors: c is nil, or opts is invalid (Options.Validate).
func NewWorker(c *client.Client, opts Options) (*Worker, error) {
	if c == nil {
		return nil, errors.New("jobs: NewWorker needs a client (client.New)")
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Worker{c: c, opts: opts, log: opts.Logger, handlers: map[string]handlerFunc{}}, nil
}

// ID is the worker's id (Options.WorkerID, or its default).
func (w *Worker) ID() string { return w.opts.WorkerID }

// register adds the handler of jobType.
func (w *Worker) register(jobType string, h handlerFunc) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.running:
		return fmt.Errorf("jobs: cannot register job type %q while the worker runs: register every handler before Run", jobType)
	case w.handlers[jobType] != nil:
		return fmt.Errorf("jobs: job type %q already has a handler", jobType)
	case len(w.handlers) == api.JobPollTypesMax:
		return fmt.Errorf("jobs: job type %q is one too many: a worker serves at most %d types", jobType, api.JobPollTypesMax)
	}
	w.handlers[jobType] = h
	return nil
}

// start marks the worker running and returns its job types, sorted.
func (w *Worker) start() ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return nil, errors.New("jobs: the worker is running already: call Run once at a time")
	}
	if len(w.handlers) == 0 {
		return nil, errors.New("jobs: the worker has no handlers: register at least one with jobs.Handle before Run")
	}
	w.running = true
	types := make([]string, 0, len(w.handlers))
	for t := range w.handlers {
		types = append(types, t)
	}
	slices.Sort(types)
	return types, nil
}

func (w *Worker) stop() {
	w.mu.Lock()
	w.running = false
	w.mu.Unlock()
}

func (w *Worker) handler(jobType string) handlerFunc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handlers[jobType]
}

// Run serves jobs until ctx is done: it long-polls the server for jobs of
// the registered types while fewer than Options.Concurrency run, and runs
// each in its own goroutine (see Handle). When ctx is done it stops
// polling (a poll in flight is abandoned: a job the server claimed for it
// in that instant is queued again when its lease expires), lets the jobs
// in flight finish and report within Options.ShutdownGrace, then cancels
// the rest (cause ErrShutdown; they are not reported) and returns once
// every handler has returned. A handler must return soon after its
// context is done.
//
// Polls that fail for a reason that may pass (the server unreachable, a
// 5xx, a 429) are retried with backoff (0.1 s to 5 s) and logged. Run
// returns nil after ctx is done, or an error: no handler is registered,
// Run is running already, or the server refused a poll for good (401: the
// key is missing, unknown or revoked; 403: its role may not serve jobs;
// 400: the poll breaks the protocol) — then after the same graceful stop.
func (w *Worker) Run(ctx context.Context) error {
	types, err := w.start()
	if err != nil {
		return err
	}
	defer w.stop()
	// The jobs' contexts outlive ctx by the shutdown grace.
	jobsCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(nil)
	var wg sync.WaitGroup
	slots := make(chan struct{}, w.opts.Concurrency)
	pollErr := w.poll(ctx, types, slots, func(job *api.Job, claimed time.Time) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.runJob(jobsCtx, job, claimed)
		}()
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(max(w.opts.ShutdownGrace, 0))
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		if n := len(slots); n > 0 {
			w.log.Warn("jobs: shutdown grace passed; cancelling the jobs still running (their leases expire and the server queues them again)",
				"running", n, "grace", w.opts.ShutdownGrace)
		}
		cancelJobs(ErrShutdown)
		<-done
	}
	return pollErr
}

// poll is Run's poll loop: it takes a slot, polls, and hands a claimed
// job to start with the moment its poll answered (which frees the slot
// when the job is done). It returns nil when ctx is done, or the error of
// a poll refused for good.
func (w *Worker) poll(ctx context.Context, types []string, slots chan struct{}, start func(*api.Job, time.Time)) error {
	failures := 0
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		job, err := w.c.PollJob(ctx, types, w.opts.WorkerID, w.opts.PollWait)
		if err == nil && job != nil {
			// Claimed: run it, even when ctx is done by now (within the
			// shutdown grace), rather than leave it to its lease.
			failures = 0
			start(job, time.Now())
			continue
		}
		<-slots
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil: // none arrived within the wait
			failures = 0
			continue
		case pollRefused(err):
			w.log.Error("jobs: the server refused the poll; stopping", "error", err, "types", types)
			return fmt.Errorf("jobs: polling for %v: %w", types, err)
		}
		failures++
		delay := backoff.Exponential(pollRetryMin, pollRetryMax, 2, failures)
		w.log.Warn("jobs: poll failed; retrying", "error", err, "failures", failures, "retry_in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// pollRefused reports whether a poll's error will not pass by trying
// again: a client without a usable server URL, a 4xx answer but 408 and
// 429.
func pollRefused(err error) bool {
	if errors.Is(err, client.ErrBadURL) {
		return true
	}
	var p *api.Problem
	if !errors.As(err, &p) {
		return false
	}
	return p.Status >= 400 && p.Status < 500 && p.Status != http.StatusRequestTimeout && p.Status != http.StatusTooManyRequests
}
