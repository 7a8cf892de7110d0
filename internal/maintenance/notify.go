package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Notify retry defaults.
const (
	NotifyIntervalDefault    = time.Second
	NotifyRetryMinDefault    = time.Second
	NotifyRetryMaxDefault    = 10 * time.Minute
	NotifyTimeoutDefault     = 10 * time.Second
	NotifyConcurrencyDefault = 8
	NotifyBatchLimitDefault  = 100
)

// DeliverFunc delivers the notify request of one registered wait (for the
// engine: re-sign the wait's token and POST {run_id, wait_id, signal,
// token, wake_url, expires_at} plus the rendered body to the wait's
// notify URL). A nil error means delivered; any error means try again
// later.
type DeliverFunc func(ctx context.Context, w *starflowtype.Wait) error

// NotifyConfig configures a NotifyRetrier.
type NotifyConfig struct {
	// Deliver sends one notify request. Required.
	Deliver DeliverFunc
	// Interval between passes. Default 1 s. One pass also runs at Start.
	Interval time.Duration
	// RetryMin and RetryMax bound the wait before the next try after a
	// failed one: RetryMin × 2^(tries-1), at most RetryMax, ±20% jitter
	// within that cap (never above it).
	// Defaults 1 s and 10 min.
	RetryMin, RetryMax time.Duration
	// Timeout bounds one delivery. Default 10 s.
	Timeout time.Duration
	// Concurrency is how many deliveries run at once. Default 8.
	Concurrency int
	// BatchLimit is how many due notifies one pass takes. Default 100.
	BatchLimit int
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// NotifyRetrier delivers the notify requests of registered waits that
// have not been delivered yet (PendingNotifies) and records each try
// (MarkNotified): delivered, or failed with the next try backed off
// exponentially. It only ever sees waits whose row is committed, so a
// token is never sent before its wait is registered. A wait that stops
// being pending (woken, timed out, cancelled) is no longer listed, so
// retries end with the wait.
//
// Delivery is at least once: a process that dies after the POST and
// before MarkNotified, or two processes whose passes overlap, may send a
// request twice. Receivers tell duplicates apart by wait_id; the token
// itself is single use.
type NotifyRetrier struct {
	store state.Waiter
	cfg   NotifyConfig
	*periodic
}

// NewNotifyRetrier returns a notify retrier over store. It fails when
// cfg.Deliver is nil.
func NewNotifyRetrier(store state.Waiter, cfg NotifyConfig) (*NotifyRetrier, error) {
	if cfg.Deliver == nil {
		return nil, errors.New("maintenance: NotifyConfig.Deliver is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = NotifyIntervalDefault
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = NotifyRetryMinDefault
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = NotifyRetryMaxDefault
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = cfg.RetryMin
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = NotifyTimeoutDefault
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = NotifyConcurrencyDefault
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = NotifyBatchLimitDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &NotifyRetrier{store: store, cfg: cfg}
	n.periodic = newPeriodic("notify retrier", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := n.Pass(ctx)
		return err
	})
	return n, nil
}

// NotifyResult counts one pass's tries.
type NotifyResult struct {
	Delivered, Failed int
}

// Pass tries every due notify once (at most BatchLimit) and records each
// outcome. Deliveries interrupted by ctx are not recorded as failures.
// The error is the listing's, or the first MarkNotified error.
func (n *NotifyRetrier) Pass(ctx context.Context) (NotifyResult, error) {
	var res NotifyResult
	due, err := n.store.PendingNotifies(ctx, &state.PendingNotifiesParams{Limit: n.cfg.BatchLimit})
	if err != nil {
		return res, err
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, n.cfg.Concurrency)
	)
	for _, w := range due {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			delivered, markErr := n.try(ctx, w)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case markErr != nil:
				if firstErr == nil {
					firstErr = markErr
				}
			case delivered:
				res.Delivered++
			default:
				res.Failed++
			}
		}()
	}
	wg.Wait()
	return res, firstErr
}

// try delivers one wait's notify and records the outcome; it reports
// whether it was delivered.
func (n *NotifyRetrier) try(ctx context.Context, w *starflowtype.Wait) (bool, error) {
	dctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	err := n.cfg.Deliver(dctx, w)
	cancel()
	if err != nil && ctx.Err() != nil {
		return false, nil // stopping: this try does not count
	}
	p := &state.MarkNotifiedParams{WaitID: w.ID, Delivered: err == nil}
	if err != nil {
		p.RetryIn = backoff.Exponential(n.cfg.RetryMin, n.cfg.RetryMax, 2, w.NotifyTries+1)
		n.cfg.Logger.Warn("notify failed; will retry", "run_id", w.RunID, "wait_id", w.ID, "tries", w.NotifyTries+1, "retry_in", p.RetryIn.Round(time.Millisecond), "error", err)
	} else {
		n.cfg.Logger.Info("notify delivered", "run_id", w.RunID, "wait_id", w.ID)
	}
	if merr := n.store.MarkNotified(context.WithoutCancel(ctx), p); merr != nil {
		return false, merr
	}
	return err == nil, nil
}
