package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// TestLeaderLostWhenItsConnectionEnds: terminating the leader's session
// (an operator's pg_terminate_backend, a server restart) ends its term at
// once — Lost closes well within a check interval — and a waiting
// candidate of another Store takes over; the leader connection is named
// in pg_stat_activity.
func TestLeaderLostWhenItsConnectionEnds(t *testing.T) {
	t.Parallel()
	a := fresh(t)
	b := open(t, a.Schema(), nil)
	ctx := t.Context()
	const ttl = 5 * time.Second // checks every 1 s: the loss must not wait for one
	la, err := a.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(context.Background())
	won := make(chan state.Leadership, 1)
	go func() {
		l, err := b.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-b", TTL: ttl})
		if err != nil {
			t.Errorf("owner-b's campaign: %v", err)
		}
		won <- l
	}()
	var n int
	if err := a.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		pgstore.LeaderApplicationName+"owner-a").Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the leader's session: %d sessions, %v", n, err)
	}
	terminated := time.Now()
	select {
	case <-la.Lost():
		if d := time.Since(terminated); d > 500*time.Millisecond {
			t.Errorf("Lost closed %s after the session ended, want at once", d)
		}
		if err := la.Err(); err == nil || !strings.Contains(err.Error(), "connection failed") {
			t.Errorf("Err() = %v, want the connection's failure", err)
		}
	case <-time.After(ttl):
		t.Fatal("the leader did not notice its session ended")
	}
	select {
	case lb := <-won:
		if lb == nil {
			t.FailNow()
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(ttl):
		t.Fatal("owner-b did not take over after the leader's session ended")
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release after Lost: %v", err)
	}
}

// TestLeaderPerSchema: deployments in two schemas of one database elect
// their leaders apart (the lock key includes the schema).
func TestLeaderPerSchema(t *testing.T) {
	t.Parallel()
	a, b := fresh(t), fresh(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, s := range []*pgstore.Store{a, b} {
		l, err := s.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-" + s.Schema(), TTL: time.Second})
		if err != nil {
			t.Fatalf("schema %s: %v", s.Schema(), err)
		}
		defer l.Release(context.Background())
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	defer ccancel()
	if _, err := a.Campaign(cctx, &state.CampaignParams{Name: "maintenance", Owner: "another", TTL: time.Second}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second candidate in schema %s: %v, want it to wait", a.Schema(), err)
	}
}
