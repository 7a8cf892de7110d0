package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state"
)

var _ state.Elector = (*Store)(nil)

// leaderLockClass is the first key of the session-level advisory lock a
// leader holds ("lead"); the second is hashtext(schema:name), so
// deployments in different schemas of one database elect apart.
const leaderLockClass = 0x6c656164

// LeaderApplicationName starts the application_name of the dedicated
// connection of a candidate or leader (the owner follows it), so
// pg_stat_activity shows who leads:
//
//	SELECT application_name FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
//	 WHERE l.locktype = 'advisory' AND l.classid = 1818583396 AND l.granted;
const LeaderApplicationName = "starflow leader "

// Campaign implements state.Elector with a session-level advisory lock
// (pg_try_advisory_lock) taken on a dedicated connection outside the
// pool, tried every p.TTL/5. The lock lives as long as that connection:
// when the holder's process dies the server ends the session and the
// lock is free at once; when its host or network froze, the session's
// idle_session_timeout (p.TTL; PostgreSQL 14 and later) ends it at most
// TTL after the holder's last check. The holder checks its connection
// every TTL/5 and loses the term (Lost) at the first failed check,
// closing the connection. Connect directly to PostgreSQL or through a
// session-mode pooler: a transaction-mode pooler (PgBouncer
// pool_mode=transaction) cannot keep a session-level lock.
func (s *Store) Campaign(ctx context.Context, p *state.CampaignParams) (state.Leadership, error) {
	switch {
	case p.Name == "" || p.Owner == "":
		return nil, errors.New("pgstore: campaign: Name and Owner are required")
	case p.TTL < state.LeaderTTLMin:
		return nil, fmt.Errorf("pgstore: campaign: TTL %s is below the minimum %s", p.TTL, state.LeaderTTLMin)
	}
	cc := s.pool.Config().ConnConfig.Copy()
	name := LeaderApplicationName + p.Owner
	if len(name) > maxIdentifier {
		name = name[:maxIdentifier]
	}
	cc.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("pgstore: campaign %s: connect: %w", p.Name, translate(err))
	}
	closeConn := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	// A holder whose host froze must not keep the lock for the hours TCP
	// keepalives take: the server ends a session idle for TTL. Servers
	// before PostgreSQL 14 lack the setting; the lock then lasts until
	// the server notices the connection is gone.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", p.TTL.Milliseconds())); err != nil && ctx.Err() != nil {
		closeConn()
		return nil, ctx.Err()
	}
	retry := p.TTL / 5
	for {
		sent := time.Now()
		var held bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || ':' || $2))`,
			leaderLockClass, p.Name).Scan(&held)
		if err != nil {
			closeConn()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("pgstore: campaign %s: %w", p.Name, translate(err))
		}
		if held {
			l := &leadership{conn: conn, p: *p, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			go l.check(sent)
			return l, nil
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			closeConn()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// leadership is one term: the advisory lock held by conn.
type leadership struct {
	conn *pgx.Conn // used by check, then by Release once check has returned
	p    state.CampaignParams
	lost chan struct{}
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	err      error
	released bool
	closed   bool // conn closed (by a failed check)
}

func (l *leadership) Lost() <-chan struct{} { return l.lost }

func (l *leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// check watches the connection until Release: it waits for anything the
// server sends (a session terminated by an operator, a server shutting
// down: noticed at once) for TTL/5, then pings it (a network or server
// that stopped answering). A failure, or no ping succeeding within
// 0.9 × TTL of being sent, ends the term: the connection is closed
// (freeing the lock if the server still holds it) and Lost closed.
func (l *leadership) check(validFrom time.Time) {
	defer close(l.done)
	ttl := l.p.TTL
	hold := ttl - ttl/10
	deadline := validFrom.Add(hold)
	stopped, cancelStopped := context.WithCancel(context.Background())
	defer cancelStopped()
	go func() {
		select {
		case <-l.stop:
			cancelStopped()
		case <-stopped.Done():
		}
	}()
	for {
		wctx, cancel := context.WithTimeout(stopped, ttl/5)
		err := l.conn.PgConn().WaitForNotification(wctx)
		cancel()
		if stopped.Err() != nil {
			return
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || l.conn.IsClosed() {
			if err == nil {
				err = errors.New("unexpected notification on the leader connection")
			}
			l.fail(err)
			return
		}
		sent := time.Now()
		end := sent.Add(ttl / 5)
		if deadline.Before(end) {
			end = deadline
		}
		ctx, cancel := context.WithDeadline(stopped, end)
		_, err = l.conn.Exec(ctx, "SELECT 1")
		cancel()
		if stopped.Err() != nil {
			return
		}
		if err == nil && time.Now().Before(deadline) {
			deadline = sent.Add(hold)
			continue
		}
		if err == nil {
			err = fmt.Errorf("the check took past the end of the term (%s)", hold)
		}
		l.fail(err)
		return
	}
}

// fail closes the connection and ends the term with err.
func (l *leadership) fail(err error) {
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = l.conn.Close(cctx)
	cancel()
	l.mu.Lock()
	l.closed = true
	l.err = fmt.Errorf("pgstore: leadership %s lost: its connection failed: %w", l.p.Name, translate(err))
	l.mu.Unlock()
	close(l.lost)
}

// Release stops the checks, unlocks and closes the connection.
func (l *leadership) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil
	}
	// Unlocking first frees the lock before the session ends; closing
	// ends the session, which frees it anyway should the unlock fail (a
	// check interrupted by Release may leave the connection unusable).
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema() || ':' || $2))`, leaderLockClass, l.p.Name)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := l.conn.Close(cctx); err != nil {
		return fmt.Errorf("pgstore: release leadership %s: %w", l.p.Name, err)
	}
	return nil
}
