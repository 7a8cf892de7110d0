package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/storecore"
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
// closing the connection. Release stops the checks, unlocks and closes
// the connection. Connect directly to PostgreSQL or through a
// session-mode pooler: a transaction-mode pooler (PgBouncer
// pool_mode=transaction) cannot keep a session-level lock.
func (s *Store) Campaign(ctx context.Context, p *state.CampaignParams) (state.Leadership, error) {
	return storecore.Campaign(ctx, "pgstore", p, s.candidate)
}

// leaderKey is the second key of the leader's advisory lock, of $2 (the
// leadership's name).
const leaderKey = `hashtext(current_schema() || ':' || $2)`

// candidate connects the dedicated connection of a campaign and returns
// the advisory lock's mechanism for storecore.Campaign.
func (s *Store) candidate(ctx context.Context, p *state.CampaignParams) (*storecore.Candidate, error) {
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
	closeConn := func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		return conn.Close(cctx)
	}
	// A holder whose host froze must not keep the lock for the hours TCP
	// keepalives take: the server ends a session idle for TTL. Servers
	// before PostgreSQL 14 lack the setting; the lock then lasts until
	// the server notices the connection is gone.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", p.TTL.Milliseconds())); err != nil && ctx.Err() != nil {
		_ = closeConn(ctx)
		return nil, ctx.Err()
	}
	closed := false // conn closed by a failed check; read by Release once the checks have returned
	// The holder watches the connection until Release: it waits for
	// anything the server sends (a session terminated by an operator, a
	// server shutting down: noticed at once) for TTL/5, then pings it (a
	// network or server that stopped answering). A failure, or no ping
	// succeeding within 0.9 × TTL of being sent, ends the term: the
	// connection is closed (freeing the lock if the server still holds it)
	// and Lost closed.
	return &storecore.Candidate{
		Take: func(ctx context.Context) (held bool, err error) {
			if err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, `+leaderKey+`)`, leaderLockClass, p.Name).Scan(&held); err != nil {
				err = fmt.Errorf("pgstore: campaign %s: %w", p.Name, translate(err))
			}
			return held, err
		},
		Wait: func(ctx context.Context, d time.Duration) error {
			wctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			switch err := conn.PgConn().WaitForNotification(wctx); {
			case err == nil:
				return errors.New("unexpected notification on the leader connection")
			case !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed():
				return err
			}
			return nil
		},
		Check: func(ctx context.Context) (bool, error) {
			_, err := conn.Exec(ctx, "SELECT 1")
			return true, err
		},
		Lose: func(err error) error {
			_ = closeConn(context.Background())
			closed = true
			return fmt.Errorf("pgstore: leadership %s lost: its connection failed: %w", p.Name, translate(err))
		},
		Release: func(ctx context.Context) error {
			if closed {
				return nil
			}
			// Unlocking first frees the lock before the session ends;
			// closing ends the session, which frees it anyway should the
			// unlock fail (a check interrupted by Release may leave the
			// connection unusable).
			_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, `+leaderKey+`)`, leaderLockClass, p.Name)
			if err := closeConn(ctx); err != nil {
				return fmt.Errorf("pgstore: release leadership %s: %w", p.Name, err)
			}
			return nil
		},
		Abort: func() { _ = closeConn(ctx) },
	}, nil
}
