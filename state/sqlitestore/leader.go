package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/starflow/starflow/state"
)

var _ state.Elector = (*Store)(nil)

// Campaign implements state.Elector with a lease row in leader_leases:
// every p.TTL/5 a candidate looks (one read) whether the row is held by
// another owner and unexpired, and if not takes it with one conditional
// upsert on the file's clock (free, expired, or already its own). The
// holder then renews it every TTL/5 (until = now + TTL) and loses the
// term when a renewal finds another owner, or when none succeeded within
// 0.9 × TTL of being sent (its monotonic clock: the row expires TTL after
// the renewal statement ran, which is no earlier) — so a holder gives up
// before anyone else can take over.
func (s *Store) Campaign(ctx context.Context, p *state.CampaignParams) (state.Leadership, error) {
	if err := checkCampaign(p); err != nil {
		return nil, err
	}
	retry := p.TTL / 5
	for {
		sent := time.Now()
		held, err := s.takeLeader(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if held {
			return s.newLeadership(p, sent), nil
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func checkCampaign(p *state.CampaignParams) error {
	switch {
	case p.Name == "" || p.Owner == "":
		return errors.New("sqlitestore: campaign: Name and Owner are required")
	case p.TTL < state.LeaderTTLMin:
		return fmt.Errorf("sqlitestore: campaign: TTL %s is below the minimum %s", p.TTL, state.LeaderTTLMin)
	}
	return nil
}

// takeLeader takes the leadership for p.Owner when it is free, expired or
// already p.Owner's. Returns whether p.Owner holds it. A leadership held
// by another owner costs one read and no write.
func (s *Store) takeLeader(ctx context.Context, p *state.CampaignParams) (bool, error) {
	var one int
	err := s.read.QueryRowContext(ctx, `SELECT 1 FROM leader_leases WHERE name = ? AND owner <> ? AND until >= `+sqliteNow,
		p.Name, p.Owner).Scan(&one)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("sqlitestore: campaign %s: %w", p.Name, err)
	}
	res, err := s.write.ExecContext(ctx, `INSERT INTO leader_leases (name, owner, until, elected_at)
VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now', ?), `+sqliteNow+`)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until, elected_at = excluded.elected_at
WHERE leader_leases.owner = excluded.owner OR leader_leases.until < `+sqliteNow,
		p.Name, p.Owner, sqliteOffset(p.TTL))
	if err != nil {
		return false, fmt.Errorf("sqlitestore: campaign %s: %w", p.Name, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlitestore: campaign %s: %w", p.Name, err)
	}
	return n == 1, nil
}

// leadership is one term held in leader_leases.
type leadership struct {
	s    *Store
	p    state.CampaignParams
	lost chan struct{}
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	err      error
	released bool
}

// newLeadership starts renewing the term that began with the statement
// sent at validFrom.
func (s *Store) newLeadership(p *state.CampaignParams, validFrom time.Time) *leadership {
	l := &leadership{s: s, p: *p, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew(validFrom)
	return l
}

func (l *leadership) Lost() <-chan struct{} { return l.lost }

func (l *leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *leadership) lose(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	close(l.lost)
}

// renew extends the lease every TTL/5 until Release or the term is lost.
func (l *leadership) renew(validFrom time.Time) {
	defer close(l.done)
	ttl := l.p.TTL
	hold := ttl - ttl/10
	deadline := validFrom.Add(hold)
	t := time.NewTicker(ttl / 5)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		sent := time.Now()
		// A renewal may wait for the file's write lock; it never outlives
		// the term it is trying to extend.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		res, err := l.s.write.ExecContext(ctx, `UPDATE leader_leases SET until = strftime('%Y-%m-%dT%H:%M:%fZ','now', ?)
WHERE name = ? AND owner = ?`, sqliteOffset(ttl), l.p.Name, l.p.Owner)
		cancel()
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err == nil && n == 0:
			l.lose(fmt.Errorf("sqlitestore: leadership %s taken over by another candidate", l.p.Name))
			return
		case err == nil:
			deadline = sent.Add(hold)
		case !time.Now().Before(deadline):
			l.lose(fmt.Errorf("sqlitestore: leadership %s not renewed within %s: %w", l.p.Name, hold, translate(err)))
			return
		}
	}
}

// Release stops the renewals and deletes the row (when it is still this
// owner's), so that another candidate takes over at its next try.
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
	if _, err := l.s.write.ExecContext(ctx, `DELETE FROM leader_leases WHERE name = ? AND owner = ?`, l.p.Name, l.p.Owner); err != nil {
		return fmt.Errorf("sqlitestore: release leadership %s: %w", l.p.Name, translate(err))
	}
	return nil
}
