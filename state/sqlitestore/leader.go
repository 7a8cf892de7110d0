package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/starflow/starflow/internal/storecore"
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
// before anyone else can take over. Release stops the renewals and
// deletes the row (when it is still this owner's), so that another
// candidate takes over at its next try.
func (s *Store) Campaign(ctx context.Context, p *state.CampaignParams) (state.Leadership, error) {
	return storecore.Campaign(ctx, "sqlitestore", p, s.candidate)
}

// candidate is the lease row's mechanism for storecore.Campaign. A
// renewal may wait for the file's write lock (Patient); it never outlives
// the term it is trying to extend.
func (s *Store) candidate(_ context.Context, p *state.CampaignParams) (*storecore.Candidate, error) {
	return &storecore.Candidate{
		Take: func(ctx context.Context) (bool, error) { return s.takeLeader(ctx, p) },
		Check: func(ctx context.Context) (bool, error) {
			res, err := s.write.ExecContext(ctx, `UPDATE leader_leases SET until = strftime('%Y-%m-%dT%H:%M:%fZ','now', ?)
WHERE name = ? AND owner = ?`, sqliteOffset(p.TTL), p.Name, p.Owner)
			if err != nil {
				return false, err
			}
			n, err := res.RowsAffected()
			return n > 0, err
		},
		Patient: true,
		Lose: func(err error) error {
			return fmt.Errorf("sqlitestore: leadership %s not renewed within %s: %w", p.Name, p.TTL-p.TTL/10, translate(err))
		},
		Release: func(ctx context.Context) error {
			if _, err := s.write.ExecContext(ctx, `DELETE FROM leader_leases WHERE name = ? AND owner = ?`, p.Name, p.Owner); err != nil {
				return fmt.Errorf("sqlitestore: release leadership %s: %w", p.Name, translate(err))
			}
			return nil
		},
	}, nil
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
