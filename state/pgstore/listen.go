package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen's timing.
const (
	// listenBackoffMin and listenBackoffMax bound the wait before
	// reconnecting; it doubles after each failed attempt.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenPingInterval: after this long without a notification, Listen
	// pings the server, so a connection that died silently is noticed and
	// replaced.
	listenPingInterval = 30 * time.Second
)

// Listen LISTENs on Channel and calls onNotify for every notification
// (EnqueueRun, and every write that re-queues a run, notifies it when it
// commits). It holds one dedicated connection outside the pool and blocks
// until ctx is done, then returns ctx's error; it returns no other error.
// When the connection fails it reconnects with a backoff (100 ms doubling
// to 5 s) and logs to Config.Logger.
//
// onNotify is also called each time the connection is (re-)established,
// since work enqueued while Listen was not listening was announced to no
// one. Calls are sequential, from Listen's goroutine; a slow onNotify
// delays the next, so it should only signal (e.g. a non-blocking send on a
// channel of capacity 1).
func (s *Store) Listen(ctx context.Context, onNotify func()) error {
	backoff := listenBackoffMin
	for {
		err := s.listenOnce(ctx, onNotify, func() { backoff = listenBackoffMin })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.cfg.Logger.Warn("pgstore: listen connection failed; reconnecting",
			"channel", s.channel, "error", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce connects, LISTENs and waits for notifications until the
// connection fails or ctx is done. connected is called once LISTEN is in
// place.
func (s *Store) listenOnce(ctx context.Context, onNotify, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	onNotify()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPingInterval)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			onNotify()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for a while: check the connection is still alive.
			if err := conn.Ping(ctx); err != nil {
				return err
			}
		default:
			return err
		}
	}
}
