package storecore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/state"
)

// Candidate is a dialect's mechanism of leadership (state.Elector) for one
// campaign; Campaign runs the rest: the checks of the parameters, the
// tries every TTL/5, and the term — its keep-alive loop, Lost, Err and
// Release. Take and Abort run within Campaign, the others after it.
type Candidate struct {
	// Take tries once to take the leadership and reports whether the
	// candidate holds it now. Its error ends the campaign.
	Take func(ctx context.Context) (held bool, err error)
	// Wait returns after d, when ctx ends (Release), or — with an error
	// that ends the term — when something happened to the term first.
	// Nil waits for d.
	Wait func(ctx context.Context, d time.Duration) error
	// Check checks or renews the term once, within ctx's deadline; held
	// false says another candidate took the leadership over.
	Check func(ctx context.Context) (held bool, err error)
	// Patient: a check may last until the end of the term and outlives
	// Release (which waits for it), a failed one is tried again at the
	// next interval while the term lasts (the term is lost at its end,
	// with the last failure), and one that succeeded renews
	// the term from its sending whenever it returns. Otherwise a check
	// lasts at most an interval, Release interrupts it, the first failure
	// ends the term, and so does a check that returned after its end.
	Patient bool
	// Lose turns the cause of a failed wait or check into the term's Err
	// and frees what the term held.
	Lose func(cause error) error
	// Release frees the leadership once the keep-alive loop has stopped
	// (after a loss too).
	Release func(ctx context.Context) error
	// Abort frees what a campaign that failed or ended with its ctx held;
	// nil when there is nothing.
	Abort func()
}

// Campaign implements state.Elector.Campaign for the store named store
// ("pgstore", the start of its errors): it checks p, gets the mechanism
// from candidate, then calls Take every p.TTL/5 until it holds the
// leadership, fails, or ctx ends (ctx's error then, whatever Take said).
// The term starts when the successful Take was sent; the keep-alive loop
// then waits TTL/5 (Wait) and checks (Check) in turn, and loses the term
// when no check succeeded within 0.9 × TTL of being sent.
func Campaign(ctx context.Context, store string, p *state.CampaignParams,
	candidate func(context.Context, *state.CampaignParams) (*Candidate, error)) (state.Leadership, error) {
	switch {
	case p.Name == "" || p.Owner == "":
		return nil, fmt.Errorf("%s: campaign: Name and Owner are required", store)
	case p.TTL < state.LeaderTTLMin:
		return nil, fmt.Errorf("%s: campaign: TTL %s is below the minimum %s", store, p.TTL, state.LeaderTTLMin)
	}
	c, err := candidate(ctx, p)
	if err != nil {
		return nil, err
	}
	for {
		sent := time.Now()
		held, err := c.Take(ctx)
		if err == nil && held {
			stopped, stop := context.WithCancel(context.Background())
			l := &leadership{c: c, stop: stop, lost: make(chan struct{}), done: make(chan struct{})}
			go l.run(stopped, store, *p, sent)
			return l, nil
		}
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(p.TTL / 5):
				continue
			}
		}
		if c.Abort != nil {
			c.Abort()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
}

// leadership is one term.
type leadership struct {
	c        *Candidate
	stop     context.CancelFunc // ends the keep-alive loop
	lost     chan struct{}
	done     chan struct{} // closed when the keep-alive loop has returned
	released atomic.Bool

	mu  sync.Mutex
	err error
}

func (l *leadership) Lost() <-chan struct{} { return l.lost }

func (l *leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops the keep-alive loop once and waits for it, then frees the
// leadership (the dialect's Release). A second call returns nil.
func (l *leadership) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return nil
	}
	l.stop()
	<-l.done
	return l.c.Release(ctx)
}

// run keeps the term that began with the Take sent at validFrom until
// stopped ends (Release) or the term is lost: then it sets Err and closes
// Lost.
func (l *leadership) run(stopped context.Context, store string, p state.CampaignParams, validFrom time.Time) {
	defer close(l.done)
	if err := l.keep(stopped, store, p, validFrom); err != nil {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.lost)
	}
}

// keep is run's loop; it returns the term's Err, or nil when stopped.
func (l *leadership) keep(stopped context.Context, store string, p state.CampaignParams, validFrom time.Time) error {
	c, interval, hold := l.c, p.TTL/5, p.TTL-p.TTL/10
	deadline := validFrom.Add(hold)
	var failed error // the last check's, while a patient term lasts
	for {
		// The wait ends by the term's end: a patient term whose checks
		// failed is lost then, not at the next interval, when the
		// leadership may be another's already.
		d := min(interval, time.Until(deadline))
		if c.Wait == nil {
			select {
			case <-stopped.Done():
			case <-time.After(d):
			}
		} else if err := c.Wait(stopped, d); err != nil && stopped.Err() == nil {
			return c.Lose(err)
		}
		if stopped.Err() != nil {
			return nil
		}
		if failed != nil && !time.Now().Before(deadline) {
			return c.Lose(failed)
		}
		sent := time.Now()
		ctx, end := stopped, deadline
		if c.Patient {
			ctx = context.WithoutCancel(stopped)
		} else if e := sent.Add(interval); e.Before(end) {
			end = e
		}
		ctx, cancel := context.WithDeadline(ctx, end)
		held, err := c.Check(ctx)
		cancel()
		switch {
		case stopped.Err() != nil && !c.Patient:
			return nil
		case err == nil && !held:
			return fmt.Errorf("%s: leadership %s taken over by another candidate", store, p.Name)
		case err == nil && (c.Patient || time.Now().Before(deadline)):
			deadline, failed = sent.Add(hold), nil
		case err == nil:
			return c.Lose(fmt.Errorf("the check took past the end of the term (%s)", hold))
		case !c.Patient || !time.Now().Before(deadline):
			return c.Lose(err)
		default:
			failed = err
		}
	}
}
