package warm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// PresenceIntervalDefault is how often a PresencePublisher publishes when
// PresencePublisherConfig.Interval is zero.
const PresenceIntervalDefault = 5 * time.Second

// leaveTTL is the ttl of the last publication at Stop: the entry expires at
// once, so peers stop listing the runner without waiting for its ttl.
const leaveTTL = time.Millisecond

// PresencePublisherConfig configures a PresencePublisher.
type PresencePublisherConfig struct {
	// Store receives the presence (required).
	Store Store
	// Info returns the runner's current presence (required); the publisher
	// sets LastBeat. Called from the publisher's goroutine.
	Info func() Presence
	// Interval between publications. Default PresenceIntervalDefault.
	Interval time.Duration
	// TTL of each publication. Default 3 × Interval; must exceed Interval.
	TTL time.Duration
	// Timeout bounds one publication. Default Interval.
	Timeout time.Duration
	// OnError, when set, is called (from the publisher's goroutine) with
	// every failed publication's error; publishing goes on.
	OnError func(error)
	// Now is the clock of LastBeat. Default time.Now.
	Now func() time.Time
}

// PresencePublisher publishes a runner's presence (SPEC §8: peer discovery)
// at once and then every Interval, each with ttl TTL, until Stop; at Stop
// it publishes once more with a ttl of 1 ms so the runner leaves the list
// promptly. A failed publication is reported to OnError and retried at the
// next tick.
type PresencePublisher struct {
	c PresencePublisherConfig

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool

	published, failed atomic.Int64
}

// NewPresencePublisher checks c and fills its defaults. Errors: no Store,
// no Info, a negative duration, a TTL not above Interval.
func NewPresencePublisher(c PresencePublisherConfig) (*PresencePublisher, error) {
	switch {
	case c.Store == nil:
		return nil, errors.New("warm: PresencePublisherConfig.Store is nil")
	case c.Info == nil:
		return nil, errors.New("warm: PresencePublisherConfig.Info is nil")
	case c.Interval < 0 || c.TTL < 0 || c.Timeout < 0:
		return nil, errors.New("warm: PresencePublisherConfig: Interval, TTL and Timeout must not be negative")
	}
	if c.Interval == 0 {
		c.Interval = PresenceIntervalDefault
	}
	if c.TTL == 0 {
		c.TTL = 3 * c.Interval
	}
	if c.TTL <= c.Interval {
		return nil, invalid("PresencePublisherConfig: TTL %v must exceed Interval %v", c.TTL, c.Interval)
	}
	if c.Timeout == 0 {
		c.Timeout = c.Interval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &PresencePublisher{c: c}, nil
}

// Start begins publishing in a goroutine and returns at once. The
// publisher stops when ctx ends or at Stop. Starting twice, or after Stop,
// does nothing.
func (p *PresencePublisher) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil || p.stopped {
		return
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go p.loop(ctx, p.done)
}

// Stop stops publishing, waits for the goroutine, and withdraws the
// presence (one last publication with a 1 ms ttl, bounded by Timeout).
// Safe to call twice and before Start.
func (p *PresencePublisher) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	ctx, cancelLeave := context.WithTimeout(context.Background(), p.c.Timeout)
	defer cancelLeave()
	p.publish(ctx, leaveTTL)
}

// Published and Failed count the publications that succeeded and failed.
func (p *PresencePublisher) Published() int64 { return p.published.Load() }

// Failed: see Published.
func (p *PresencePublisher) Failed() int64 { return p.failed.Load() }

func (p *PresencePublisher) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(p.c.Interval)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, p.c.Timeout)
		p.publish(cctx, p.c.TTL)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *PresencePublisher) publish(ctx context.Context, ttl time.Duration) {
	info := p.c.Info()
	info.LastBeat = p.c.Now().UTC()
	if err := p.c.Store.PutPresence(ctx, &info, ttl); err != nil {
		p.failed.Add(1)
		if p.c.OnError != nil && ctx.Err() == nil {
			p.c.OnError(err)
		}
		return
	}
	p.published.Add(1)
}
