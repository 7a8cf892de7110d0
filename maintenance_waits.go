package starflow

import (
	"context"
	"time"

	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/starflowtype"
)

// WaitMaintenanceConfig tunes the maintenance passes behind durable waits,
// which an Engine runs next to the lease sweep while it leads
// maintenance (Config.Maintenance). Zero values take the defaults.
type WaitMaintenanceConfig struct {
	// TimerInterval is how often due timers and wait timeouts are fired
	// (database clock). Default 1 s. One pass also runs at Start, so a
	// timer whose deadline passed while every process was down fires at
	// the next start.
	TimerInterval time.Duration
	// NotifyInterval is how often undelivered notify requests are looked
	// for. Default 1 s.
	NotifyInterval time.Duration
	// NotifyRetryMin and NotifyRetryMax bound the backoff between notify
	// tries of one wait: NotifyRetryMin × 2^(tries-1), at most
	// NotifyRetryMax, ±20% jitter within that cap (never above it).
	// Defaults 1 s and 10 min.
	NotifyRetryMin, NotifyRetryMax time.Duration
	// NotifyTimeout bounds one notify request. Default 10 s.
	NotifyTimeout time.Duration
	// Deliver sends one wait's notify request. Default: Engine.DeliverNotify
	// (the wait's token re-created and POSTed to its notify URL).
	Deliver func(ctx context.Context, w *starflowtype.Wait) error
	// SessionGCInterval is how often session variables whose keep_until
	// passed are removed. Default 1 min.
	SessionGCInterval time.Duration
}

// waitMaintenance is the set of wait passes of one maintenance term.
type waitMaintenance struct {
	timers *maintenance.TimerPoller
	notify *maintenance.NotifyRetrier
	gc     *maintenance.SessionGC
}

func (e *Engine) newWaitMaintenance() (*waitMaintenance, error) {
	c := e.cfg.WaitMaintenance
	m := &waitMaintenance{
		timers: maintenance.NewTimerPoller(e.store, maintenance.TimerConfig{
			Interval: c.TimerInterval, Logger: e.cfg.Logger, OnRequeue: e.runner.Notify, OnFire: e.countTimer,
		}),
		gc: maintenance.NewSessionGC(e.store, maintenance.SessionGCConfig{Interval: c.SessionGCInterval, Logger: e.cfg.Logger}),
	}
	deliver := c.Deliver
	if deliver == nil {
		deliver = e.DeliverNotify
	}
	var err error
	m.notify, err = maintenance.NewNotifyRetrier(e.store, maintenance.NotifyConfig{
		Deliver: deliver, Interval: c.NotifyInterval, RetryMin: c.NotifyRetryMin, RetryMax: c.NotifyRetryMax,
		Timeout: c.NotifyTimeout, Logger: e.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// FireDueWaits runs one pass of the durable timer poller now: pending
// waits whose timer is due are woken with {"fired_at": …}, those whose
// timeout passed become timed_out, and their parked runs are re-queued
// (the in-process runner is nudged). It returns the waits it changed.
// It needs no Start and no Maintenance.
func (e *Engine) FireDueWaits(ctx context.Context) ([]*starflowtype.Wait, error) {
	return maintenance.NewTimerPoller(e.store, maintenance.TimerConfig{
		Logger: e.cfg.Logger, OnRequeue: e.runner.Notify, OnFire: e.countTimer,
	}).Pass(ctx)
}

// CollectSessionVars runs one session-variable GC pass now: it removes
// the session variables whose keep_until is before the database's now and
// returns how many. It needs no Start and no Maintenance.
func (e *Engine) CollectSessionVars(ctx context.Context) (int64, error) {
	return maintenance.NewSessionGC(e.store, maintenance.SessionGCConfig{Logger: e.cfg.Logger}).Pass(ctx)
}
