package warm

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of ProgressSinkConfig.
const (
	ProgressQueueDefault   = 1024
	ProgressTimeoutDefault = 2 * time.Second
)

// ProgressSinkConfig configures a ProgressSink.
type ProgressSinkConfig struct {
	// Store receives the reports (required).
	Store Store
	// Queue is how many reports may wait for the store; more are dropped.
	// Default ProgressQueueDefault.
	Queue int
	// Timeout bounds one PutProgress. Default ProgressTimeoutDefault.
	Timeout time.Duration
	// OnDrop, when set, is called for each dropped report: err is nil when
	// the queue was full (or the sink stopped), else the store's error.
	// Called from Report's or the writer's goroutine; keep it cheap.
	OnDrop func(p *Progress, err error)
	// Now stamps Progress.At. Default time.Now.
	Now func() time.Time
}

// ProgressSink writes step progress (SPEC §8 onStepProgress; warm only) to
// a store asynchronously. Report never blocks a step: a full queue drops
// the report (progress is a hint; the next one supersedes it).
type ProgressSink struct {
	c     ProgressSinkConfig
	queue chan *Progress

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	stopped atomic.Bool

	written, dropped atomic.Int64
}

// NewProgressSink checks c and fills its defaults. Errors: no Store, a
// negative Queue or Timeout.
func NewProgressSink(c ProgressSinkConfig) (*ProgressSink, error) {
	switch {
	case c.Store == nil:
		return nil, errors.New("warm: ProgressSinkConfig.Store is nil")
	case c.Queue < 0 || c.Timeout < 0:
		return nil, errors.New("warm: ProgressSinkConfig: Queue and Timeout must not be negative")
	}
	if c.Queue == 0 {
		c.Queue = ProgressQueueDefault
	}
	if c.Timeout == 0 {
		c.Timeout = ProgressTimeoutDefault
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &ProgressSink{c: c, queue: make(chan *Progress, c.Queue)}, nil
}

// Report queues one progress report and returns at once; it has the shape
// of the engine's progress callback. A fraction outside [0, 1] is clamped
// (NaN counts as 0). Dropped when the queue is full or the sink stopped.
func (s *ProgressSink) Report(runID, scopePath, stepID string, fraction float64, message string) {
	switch {
	case math.IsNaN(fraction) || fraction < 0:
		fraction = 0
	case fraction > 1:
		fraction = 1
	}
	p := &Progress{RunID: runID, ScopePath: scopePath, StepID: stepID, Fraction: fraction, Message: message, At: s.c.Now().UTC()}
	if s.stopped.Load() {
		s.drop(p, nil)
		return
	}
	select {
	case s.queue <- p:
	default:
		s.drop(p, nil)
	}
}

// Start runs the writer goroutine and returns at once; it ends with ctx or
// at Stop. Starting twice, or after Stop, does nothing.
func (s *ProgressSink) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || s.stopped.Load() {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop stops the writer and waits for it; reports still queued are
// dropped, and so are later ones. Safe to call twice and before Start.
func (s *ProgressSink) Stop() {
	s.mu.Lock()
	if s.stopped.Swap(true) {
		s.mu.Unlock()
		return
	}
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	for {
		select {
		case p := <-s.queue:
			s.drop(p, nil)
		default:
			return
		}
	}
}

// Written and Dropped count the reports stored and dropped.
func (s *ProgressSink) Written() int64 { return s.written.Load() }

// Dropped: see Written.
func (s *ProgressSink) Dropped() int64 { return s.dropped.Load() }

func (s *ProgressSink) drop(p *Progress, err error) {
	s.dropped.Add(1)
	if s.c.OnDrop != nil {
		s.c.OnDrop(p, err)
	}
}

func (s *ProgressSink) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.queue:
			cctx, cancel := context.WithTimeout(ctx, s.c.Timeout)
			err := s.c.Store.PutProgress(cctx, p)
			cancel()
			if err != nil {
				s.drop(p, err)
				continue
			}
			s.written.Add(1)
		}
	}
}
