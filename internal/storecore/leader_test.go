package storecore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// fakeCandidate holds the leadership from its take-th Take on; its checks
// answer check; it counts Aborts and Releases.
func fakeCandidate(take int, check func() (bool, error)) (*Candidate, *atomic.Int32, *atomic.Int32) {
	var takes, aborts, releases atomic.Int32
	return &Candidate{
		Take:    func(context.Context) (bool, error) { return takes.Add(1) >= int32(take), nil },
		Check:   func(context.Context) (bool, error) { return check() },
		Lose:    func(err error) error { return errors.New("lost: " + err.Error()) },
		Release: func(context.Context) error { releases.Add(1); return nil },
		Abort:   func() { aborts.Add(1) },
	}, &aborts, &releases
}

func campaign(ctx context.Context, c *Candidate, ttl time.Duration) (state.Leadership, error) {
	return Campaign(ctx, "fake", &state.CampaignParams{Name: "n", Owner: "o", TTL: ttl},
		func(context.Context, *state.CampaignParams) (*Candidate, error) { return c, nil })
}

func TestCampaignParamsAndAbort(t *testing.T) {
	t.Parallel()
	for _, p := range []state.CampaignParams{{Owner: "o", TTL: time.Second}, {Name: "n", TTL: time.Second}, {Name: "n", Owner: "o", TTL: time.Millisecond}} {
		_, err := Campaign(t.Context(), "fake", &p, func(context.Context, *state.CampaignParams) (*Candidate, error) {
			t.Fatal("candidate called for invalid parameters")
			return nil, nil
		})
		if err == nil || !strings.HasPrefix(err.Error(), "fake: campaign: ") {
			t.Fatalf("Campaign(%+v) = %v, want fake: campaign: …", p, err)
		}
	}
	c, aborts, _ := fakeCandidate(1<<30, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := campaign(ctx, c, state.LeaderTTLMin); !errors.Is(err, context.DeadlineExceeded) || aborts.Load() != 1 {
		t.Fatalf("Campaign past its ctx = %v with %d aborts, want the ctx's error and one abort", err, aborts.Load())
	}
	boom := errors.New("boom")
	c.Take = func(context.Context) (bool, error) { return false, boom }
	if _, err := campaign(t.Context(), c, state.LeaderTTLMin); err != boom || aborts.Load() != 2 {
		t.Fatalf("Campaign whose Take fails = %v with %d aborts, want boom and a second abort", err, aborts.Load())
	}
}

// TestTermLoss: an impatient term is lost at its first failed check; a
// patient one tries again within its term, and is lost when taken over.
func TestTermLoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patient bool
		answers []error // nil: held; errTaken: not held
		want    string
	}{
		{false, []error{nil, errors.New("ping failed")}, "lost: ping failed"},
		{true, []error{errors.New("busy"), errors.New("busy"), nil, errTaken}, "fake: leadership n taken over by another candidate"},
	} {
		var checks atomic.Int32
		c, _, releases := fakeCandidate(2, func() (bool, error) {
			if err := tc.answers[min(int(checks.Add(1)), len(tc.answers))-1]; err != errTaken {
				return true, err
			}
			return false, nil
		})
		c.Patient = tc.patient
		l, err := campaign(t.Context(), c, state.LeaderTTLMin)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Lost():
		case <-time.After(5 * time.Second):
			t.Fatalf("patient %v: the term was not lost", tc.patient)
		}
		if err := l.Err(); err == nil || err.Error() != tc.want || int(checks.Load()) != len(tc.answers) {
			t.Fatalf("patient %v: Err() = %v after %d checks, want %q after %d", tc.patient, err, checks.Load(), tc.want, len(tc.answers))
		}
		if l.Release(t.Context()) != nil || l.Release(t.Context()) != nil || releases.Load() != 1 {
			t.Fatalf("patient %v: %d Releases of the dialect after two, want 1", tc.patient, releases.Load())
		}
	}
}

var errTaken = errors.New("taken")

// TestTermWaitAndRelease: a failed Wait ends the term; Release stops a
// term that keeps being checked, and it is not lost.
func TestTermWaitAndRelease(t *testing.T) {
	t.Parallel()
	c, _, _ := fakeCandidate(1, func() (bool, error) { return true, nil })
	c.Wait = func(context.Context, time.Duration) error { return errors.New("terminated") }
	l, err := campaign(t.Context(), c, state.LeaderTTLMin)
	if err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	if err := l.Err(); err == nil || err.Error() != "lost: terminated" {
		t.Fatalf("Err() = %v, want lost: terminated", err)
	}
	c, _, releases := fakeCandidate(1, func() (bool, error) { return true, nil })
	if l, err = campaign(t.Context(), c, state.LeaderTTLMin); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * state.LeaderTTLMin) // past its TTL: the checks renew it
	if err := l.Release(t.Context()); err != nil || releases.Load() != 1 || l.Err() != nil {
		t.Fatalf("Release = %v, %d dialect releases, Err() = %v", err, releases.Load(), l.Err())
	}
	select {
	case <-l.Lost():
		t.Fatal("a released term was lost")
	default:
	}
}

// TestPatientTermLostAtItsEnd: a patient term whose checks keep failing
// is lost 0.9 × TTL after its last success was sent, not at the interval
// after (by then its lease may have expired and another taken over).
func TestPatientTermLostAtItsEnd(t *testing.T) {
	t.Parallel()
	const ttl = 5 * time.Second // checks every second, the term ends at 4.5 s
	c, _, _ := fakeCandidate(1, func() (bool, error) { return true, errors.New("database is closed") })
	c.Patient = true
	start := time.Now()
	l, err := campaign(t.Context(), c, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	select {
	case <-l.Lost():
		if d := time.Since(start); d < ttl-ttl/10 || d > ttl-ttl/20 {
			t.Fatalf("lost %s after the term began, want at its end (%s)", d, ttl-ttl/10)
		}
		if err := l.Err(); err == nil || err.Error() != "lost: database is closed" {
			t.Fatalf("Err() = %v, want the last failure", err)
		}
	case <-time.After(2 * ttl):
		t.Fatal("the term was not lost")
	}
}
