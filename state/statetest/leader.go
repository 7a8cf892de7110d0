package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// leaderTTL is the leadership TTL of the election cases: short, so that
// holding past it proves the renewals work.
const leaderTTL = time.Second

// testLeader: state.Elector. One leader at a time per name among
// candidates of one adapter and of a second adapter on the same storage
// (Options.Share; the same adapter otherwise); the holder keeps it past
// its TTL (renewals); Release hands it to a waiting candidate within a
// retry interval or so; names are independent; Release is idempotent;
// Campaign ends with ctx and refuses bad parameters.
func (s *suite) testLeader(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	a, ok := h.a.(state.Elector)
	if !ok {
		t.Skip("statetest: the adapter does not implement state.Elector")
	}
	var b state.Elector = a
	if s.opts.Share != nil {
		other, ok := s.opts.Share(t, h.a).(state.Elector)
		if !ok {
			t.Fatal("statetest: Options.Share returned an adapter that is not a state.Elector")
		}
		b = other
	}
	ctx := h.ctx()
	for _, p := range []*state.CampaignParams{
		{Owner: "o", TTL: leaderTTL}, {Name: "n", TTL: leaderTTL}, {Name: "n", Owner: "o", TTL: state.LeaderTTLMin - 1},
	} {
		if l, err := a.Campaign(ctx, p); err == nil || l != nil {
			t.Fatalf("Campaign(%+v) = %v, %v; want an error", p, l, err)
		}
	}
	params := func(owner string) *state.CampaignParams {
		return &state.CampaignParams{Name: "maintenance", Owner: owner, TTL: leaderTTL}
	}
	campaignWithin := func(e state.Elector, owner string, d time.Duration) (state.Leadership, error) {
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return e.Campaign(cctx, params(owner))
	}

	la, err := campaignWithin(a, "owner-a", 5*time.Second)
	if err != nil {
		t.Fatalf("Campaign on a free leadership: %v", err)
	}
	// B waits longer than a TTL: A's renewals keep it.
	if lb, err := campaignWithin(b, "owner-b", 2*leaderTTL); !errors.Is(err, context.DeadlineExceeded) {
		if lb != nil {
			_ = lb.Release(ctx)
		}
		t.Fatalf("a second candidate's Campaign while the first holds it = %v, %v; want context.DeadlineExceeded", lb, err)
	}
	select {
	case <-la.Lost():
		t.Fatalf("the holder lost its leadership while renewing it: %v", la.Err())
	default:
	}
	// Another name is another leadership.
	other, err := b.Campaign(ctx, &state.CampaignParams{Name: "other", Owner: "owner-b", TTL: leaderTTL})
	if err != nil {
		t.Fatalf("Campaign for another name: %v", err)
	}

	// Release hands over to the waiting candidate.
	type won struct {
		l   state.Leadership
		err error
		at  time.Time
	}
	got := make(chan won, 1)
	go func() {
		l, err := campaignWithin(b, "owner-b", 20*time.Second)
		got <- won{l, err, time.Now()}
	}()
	time.Sleep(leaderTTL / 2) // let B campaign before A releases
	released := time.Now()
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	w := <-got
	if w.err != nil {
		t.Fatalf("the waiting candidate after Release: %v", w.err)
	}
	if d := w.at.Sub(released); d > leaderTTL/5+clockSlack {
		t.Fatalf("the waiting candidate took over %s after Release, want within a retry interval (%s) and some slack", d, leaderTTL/5)
	}
	// And now A waits.
	if l, err := campaignWithin(a, "owner-a", leaderTTL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("owner-a's Campaign while owner-b holds it = %v, %v; want context.DeadlineExceeded", l, err)
	}
	for _, l := range []state.Leadership{w.l, other} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		select {
		case <-l.Lost():
			t.Fatalf("Lost closed by Release: %v", l.Err())
		default:
		}
	}
	// A cancelled context ends a campaign at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if l, err := a.Campaign(cctx, params("owner-c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign with a cancelled context = %v, %v; want context.Canceled", l, err)
	}
}
