package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/state"
)

// Leader defaults.
const (
	// LeaderName is the leadership maintenance is elected under.
	LeaderName = "maintenance"
	// LeaderTTLDefault: a dead leader is replaced within about this long
	// on SQLite (its lease row expires), at once on PostgreSQL when its
	// process died (its connection closes), and within it when its host
	// froze. Candidates retry, and the leader renews, every TTL/5.
	LeaderTTLDefault = 10 * time.Second
	// serviceStopTimeout bounds the wait for one service to stop when
	// leadership ends.
	serviceStopTimeout = 30 * time.Second
)

// Service is a background service with the shared lifecycle: Start
// returns at once, Stop drains and may be called twice. LeaseSweep,
// TimerPoller, NotifyRetrier and SessionGC are Services.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// LeaderConfig configures a Leader.
type LeaderConfig struct {
	// Owner identifies this process among the candidates (the runner
	// id). Required.
	Owner string
	// Name of the leadership. Default LeaderName.
	Name string
	// TTL of the leadership (state.CampaignParams.TTL). Default
	// LeaderTTLDefault; at least state.LeaderTTLMin.
	TTL time.Duration
	// Services builds the services run while this process leads. It is
	// called at the start of every term, so each term runs fresh services
	// (whose first passes run at once). Required.
	Services func() ([]Service, error)
	// OnChange, when set, is called with true when this process becomes
	// the leader (its services started) and false when it stops being
	// one, from the Leader's goroutine.
	OnChange func(leading bool)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Leader runs maintenance in at most one process at a time: it campaigns
// for the leadership (state.Elector) and, while it holds it, runs the
// services LeaderConfig.Services builds. When the term is lost it stops
// them and campaigns again; Stop stops them and releases the leadership,
// so another candidate takes over at its next try. Over a store that is
// not a state.Elector (nullstore, a wrapper hiding it) there is no one to
// elect with: the Leader leads at once, for as long as it runs.
//
// Each change is logged (Info when a term begins or is given up, Warn when
// it is lost) with the owner, and reported to OnChange.
type Leader struct {
	elector state.Elector // nil: lead unconditionally
	cfg     LeaderConfig
	leading atomic.Bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLeader returns a Leader electing through elector (nil: none).
// Errors: a missing Owner or Services, a TTL below state.LeaderTTLMin.
func NewLeader(elector state.Elector, cfg LeaderConfig) (*Leader, error) {
	if cfg.Name == "" {
		cfg.Name = LeaderName
	}
	if cfg.TTL == 0 {
		cfg.TTL = LeaderTTLDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Owner == "":
		return nil, errors.New("maintenance: LeaderConfig.Owner is required")
	case cfg.Services == nil:
		return nil, errors.New("maintenance: LeaderConfig.Services is required")
	case cfg.TTL < state.LeaderTTLMin:
		return nil, fmt.Errorf("maintenance: leader TTL %s is below the minimum %s", cfg.TTL, state.LeaderTTLMin)
	}
	return &Leader{elector: elector, cfg: cfg}, nil
}

// Leading reports whether this process leads right now.
func (l *Leader) Leading() bool { return l.leading.Load() }

// Start campaigns in the background and returns at once. Starting twice
// is an error.
func (l *Leader) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return errors.New("maintenance: leader already started")
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go l.loop(ctx)
	return nil
}

// Stop stops campaigning; when this process leads, it stops the services
// (each waits for its pass in progress) and releases the leadership.
// Safe to call twice, and before Start.
func (l *Leader) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("maintenance: leader did not stop: %w", ctx.Err())
	}
}

func (l *Leader) loop(ctx context.Context) {
	defer close(l.done)
	log := l.cfg.Logger.With("leadership", l.cfg.Name, "owner", l.cfg.Owner)
	if l.elector == nil {
		log.Info("the store elects no leader: this process runs maintenance")
		l.term(ctx, log, nil)
		return
	}
	retry := l.cfg.TTL / 5
	failing := false
	for {
		lead, err := l.elector.Campaign(ctx, &state.CampaignParams{Name: l.cfg.Name, Owner: l.cfg.Owner, TTL: l.cfg.TTL})
		if ctx.Err() != nil {
			if lead != nil {
				_ = lead.Release(context.WithoutCancel(ctx))
			}
			return
		}
		if err != nil {
			if !failing {
				log.Warn("maintenance leader election failed; trying again", "error", err, "retry_in", retry)
				failing = true
			}
			if !sleep(ctx, retry) {
				return
			}
			continue
		}
		failing = false
		if !l.term(ctx, log, lead) && !sleep(ctx, retry) {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// term runs the services for one term of lead (nil: until ctx ends) and
// ends it: on ctx's end it stops them and releases the leadership; on a
// loss it stops them. Returns false when the services could not start.
func (l *Leader) term(ctx context.Context, log *slog.Logger, lead state.Leadership) bool {
	release := func() {
		if lead == nil {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serviceStopTimeout)
		defer cancel()
		if err := lead.Release(rctx); err != nil {
			log.Warn("releasing the maintenance leadership failed; it expires by itself", "error", err)
		}
	}
	services, err := l.cfg.Services()
	var started []Service
	if err == nil {
		for _, s := range services {
			if err = s.Start(ctx); err != nil {
				break
			}
			started = append(started, s)
		}
	}
	if err != nil {
		log.Warn("maintenance services could not start; leadership given up", "error", err)
		stopAll(ctx, log, started)
		release()
		return false
	}
	l.setLeading(true)
	log.Info("maintenance leadership gained: this process runs the lease sweep, timers and the other maintenance passes")
	var lost <-chan struct{}
	if lead != nil {
		lost = lead.Lost()
	}
	select {
	case <-ctx.Done():
		// Stopping: the services stop before the leadership is released,
		// so the next leader never runs beside them.
		stopAll(ctx, log, started)
		l.setLeading(false)
		release()
		log.Info("maintenance leadership released")
	case <-lost:
		// Another candidate may lead already: stop at once.
		l.setLeading(false)
		log.Warn("maintenance leadership lost; stopping maintenance here", "error", lead.Err())
		stopAll(ctx, log, started)
		release()
	}
	return true
}

func (l *Leader) setLeading(v bool) {
	l.leading.Store(v)
	if l.cfg.OnChange != nil {
		l.cfg.OnChange(v)
	}
}

// stopAll stops services in the reverse order of their start.
func stopAll(ctx context.Context, log *slog.Logger, services []Service) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serviceStopTimeout)
	defer cancel()
	for i := len(services) - 1; i >= 0; i-- {
		if err := services[i].Stop(sctx); err != nil {
			log.Warn("stopping a maintenance service failed", "error", err)
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Loop adapts a function that works until its context ends (such as the
// warm tier's hash sweep) to a Service.
type Loop struct {
	run func(ctx context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLoop returns a Service running run.
func NewLoop(run func(ctx context.Context)) *Loop { return &Loop{run: run} }

// Start runs the function in the background. Starting twice is an error.
func (s *Loop) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return errors.New("maintenance: loop already started")
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
	return nil
}

// Stop cancels the function's context and waits for it to return. Safe
// to call twice, and before Start.
func (s *Loop) Stop(context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}
