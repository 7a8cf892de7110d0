package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// periodic is the lifecycle shared by the wait services: one pass at
// Start, then one every interval or on Trigger, until Stop.
type periodic struct {
	name     string
	interval time.Duration
	logger   *slog.Logger
	pass     func(ctx context.Context) error

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	trigger chan struct{}
}

func newPeriodic(name string, interval time.Duration, logger *slog.Logger, pass func(context.Context) error) *periodic {
	return &periodic{name: name, interval: interval, logger: logger, pass: pass, trigger: make(chan struct{}, 1)}
}

// Start runs one pass now and then one every interval, in the background.
// Starting a second time is an error.
func (p *periodic) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		return errors.New("maintenance: " + p.name + " already started")
	}
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.done = make(chan struct{})
	go p.loop(ctx)
	return nil
}

// Trigger asks for a pass now; it never blocks.
func (p *periodic) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Stop cancels a pass in progress and returns once the loop has exited.
// Safe to call twice, and before Start.
func (p *periodic) Stop(context.Context) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

func (p *periodic) loop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if err := p.pass(ctx); err != nil && ctx.Err() == nil {
			p.logger.Warn(p.name+" failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.trigger:
		}
	}
}
