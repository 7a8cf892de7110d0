package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/starflowtype"
)

// lease keeps one claimed job's lease: heartbeats every third of the
// job's heartbeat timeout, carrying the latest progress.
type lease struct {
	c       *client.Client
	id      string
	token   string
	timeout time.Duration
	lose    context.CancelCauseFunc // cancels the job: the lease is lost
	log     *slog.Logger
	kick    chan struct{} // a Progress call: bring the next heartbeat forward

	mu       sync.Mutex
	ended    bool
	progress *float64
	message  string
}

func newLease(w *Worker, j *api.Job, lose context.CancelCauseFunc, log *slog.Logger) *lease {
	return &lease{c: w.c, id: j.ID, token: j.FencingToken, timeout: heartbeatTimeout(j), lose: lose, log: log,
		kick: make(chan struct{}, 1)}
}

// setProgress records the latest progress and asks for a heartbeat.
func (l *lease) setProgress(fraction *float64, message string) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.progress, l.message = fraction, message
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// end makes later Progress calls do nothing (the handler returned).
func (l *lease) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}

func (l *lease) request() api.JobHeartbeatRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return api.JobHeartbeatRequest{FencingToken: l.token, Progress: l.progress, Message: l.message}
}

// hold heartbeats until ctx is done. The lease is given up — the job
// cancelled with a cause wrapping ErrLeaseLost — when the server refuses
// a heartbeat (409, 404), or 0.9 × the heartbeat timeout after the last
// heartbeat that got through was sent (the claim counts as one, at
// claimed), whatever the heartbeat in flight is doing: past that point the
// server may give the job to another worker. Heartbeats go out a third of
// the timeout after the last successful one was sent; a failed one is
// retried every min(timeout/3, timeout/10); a Progress call brings the
// next one forward to ProgressInterval after the last one was sent.
func (l *lease) hold(ctx context.Context, claimed time.Time) {
	interval := l.timeout / 3
	holdFor := l.timeout - l.timeout/10
	retry := min(interval, l.timeout/10)
	expiry := time.AfterFunc(time.Until(claimed.Add(holdFor)), func() {
		l.log.Warn("jobs: no heartbeat got through in time; cancelling the job before its lease expires", "heartbeat_timeout", l.timeout)
		l.lose(fmt.Errorf("jobs: no heartbeat got through within %s: %w", holdFor, ErrLeaseLost))
	})
	defer expiry.Stop()
	lastSent := claimed
	nextAt := claimed.Add(interval)
	next := time.NewTimer(time.Until(nextAt))
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
			at := lastSent.Add(ProgressInterval)
			if now := time.Now(); at.Before(now) {
				at = now
			}
			if at.Before(nextAt) {
				nextAt = at
				next.Reset(time.Until(nextAt))
			}
			continue
		case <-next.C:
		}
		sent := time.Now()
		lastSent = sent
		hctx, cancel := context.WithTimeout(ctx, interval)
		_, err := l.c.HeartbeatJob(hctx, l.id, l.request())
		cancel()
		switch {
		case err == nil:
			if !expiry.Stop() {
				return // the deadline passed first and cancelled the job
			}
			expiry.Reset(time.Until(sent.Add(holdFor)))
			nextAt = sent.Add(interval)
		case errors.Is(err, ErrLeaseLost), errors.Is(err, starflowtype.ErrNotFound):
			l.log.Warn("jobs: the server refused the heartbeat; cancelling the job", "error", err)
			if errors.Is(err, ErrLeaseLost) {
				l.lose(fmt.Errorf("jobs: the server refused the heartbeat: %w", err))
			} else {
				l.lose(fmt.Errorf("jobs: the server refused the heartbeat: %w: %w", ErrLeaseLost, err))
			}
			return
		case ctx.Err() != nil:
			return
		default:
			l.log.Warn("jobs: heartbeat failed; retrying", "error", err, "retry_in", retry)
			nextAt = time.Now().Add(retry)
		}
		next.Reset(time.Until(nextAt))
	}
}
