package state

import (
	"context"
	"time"
)

// Elector is an optional ability of an adapter, beside Adapter (like
// Outbox): electing one leader at a time among every process and Store
// sharing the same storage, for work that should run in one place
// (maintenance: the lease sweep, timers, notify retries, session GC, the
// warm tier's hash sweep). The SQL adapters implement it: pgstore with a
// session-level advisory lock held on a dedicated connection, sqlitestore
// with a lease row in leader_leases renewed on the database file's clock.
//
// Election is an efficiency and liveness measure, not a fence: what a
// leader does must stay safe should two run at once for a moment (a
// process frozen past its term, SIGSTOP). Every maintenance pass is.
type Elector interface {
	// Campaign blocks until p.Owner holds the leadership p.Name, and
	// returns it; candidates try again every p.TTL/5. It returns ctx's
	// error when ctx ends first, and a store error when the attempt
	// cannot be made (the caller may campaign again).
	Campaign(ctx context.Context, p *CampaignParams) (Leadership, error)
}

// CampaignParams names a leadership and its candidate.
type CampaignParams struct {
	// Name of the leadership, e.g. "maintenance". Required.
	Name string
	// Owner identifies the candidate (a runner id). Required; unique per
	// candidate.
	Owner string
	// TTL bounds how long a dead holder keeps the leadership: on SQLite
	// the lease row expires TTL after its last renewal (database clock);
	// on PostgreSQL the lock goes with the holder's connection — at once
	// when the process dies, at most TTL after the last check when the
	// network or the host froze (idle_session_timeout). The holder renews
	// or checks every TTL/5 and gives up (Lost) when none succeeded within
	// 0.9 × TTL of being sent, before another could take over. Must be at
	// least LeaderTTLMin.
	TTL time.Duration
}

// LeaderTTLMin is the shortest CampaignParams.TTL accepted.
const LeaderTTLMin = 500 * time.Millisecond

// Leadership is one term of a leadership held by its candidate.
type Leadership interface {
	// Lost is closed when the term ends without Release: the leadership
	// was taken over, the connection holding it failed, or it could not
	// be renewed in time. The holder must then stop the work it leads.
	Lost() <-chan struct{}
	// Err tells why Lost was closed (nil while it is not).
	Err() error
	// Release ends the term and frees the leadership for another
	// candidate at once. Stop the led work first. Safe to call twice and
	// after Lost.
	Release(ctx context.Context) error
}
