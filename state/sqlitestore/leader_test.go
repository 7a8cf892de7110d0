package sqlitestore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// TestLeaderTakenOver: a holder whose row another owner took (an operator
// deleting it, a holder frozen past its TTL) loses its term at its next
// renewal.
func TestLeaderTakenOver(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "l.db"), nil)
	ctx := t.Context()
	const ttl = time.Second
	l, err := s.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if _, err := s.DB().ExecContext(ctx, `UPDATE leader_leases SET owner = 'intruder'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		if err := l.Err(); err == nil || !strings.Contains(err.Error(), "taken over") {
			t.Fatalf("Err() = %v, want taken over", err)
		}
	case <-time.After(2 * ttl):
		t.Fatal("the holder did not notice its row was taken")
	}
}

// TestLeaderDeadHolderExpires: a holder that stops renewing (its Store
// closed under it, as good as a dead process for the file) gives its term
// up before its row expires, and a candidate of another Store takes over
// once it has: after the holder's Lost, within TTL and a retry interval of
// the last renewal.
func TestLeaderDeadHolderExpires(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	x, y := open(t, path, nil), open(t, path, nil)
	ctx := t.Context()
	const ttl = time.Second
	lx, err := x.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-x", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan time.Time, 1)
	go func() {
		ly, err := y.Campaign(ctx, &state.CampaignParams{Name: "maintenance", Owner: "owner-y", TTL: ttl})
		if err != nil {
			t.Errorf("owner-y: %v", err)
			close(won)
			return
		}
		won <- time.Now()
		_ = ly.Release(context.Background())
	}()
	time.Sleep(ttl) // x renews meanwhile: y must still wait
	select {
	case <-won:
		t.Fatal("owner-y took over while owner-x was renewing")
	default:
	}
	died := time.Now()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	var lostAt time.Time
	select {
	case <-lx.Lost():
		lostAt = time.Now()
	case <-time.After(2 * ttl):
		t.Fatal("owner-x did not give its term up after its renewals failed")
	}
	select {
	case at, ok := <-won:
		if !ok {
			t.FailNow()
		}
		if at.Before(lostAt) {
			t.Fatalf("owner-y took over %s before owner-x gave up: two leaders", lostAt.Sub(at))
		}
		if d := at.Sub(died); d > ttl+ttl/5+500*time.Millisecond {
			t.Fatalf("owner-y took over %s after owner-x died, want within TTL and a retry interval", d)
		}
	case <-time.After(5 * ttl):
		t.Fatal("owner-y never took over from the dead owner-x")
	}
	_ = lx.Release(context.Background())
}
