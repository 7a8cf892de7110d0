package maintenance

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// fakeWaiter scripts the store side of the wait passes so that batching,
// backoff and cancellation can be checked without timing.
type fakeWaiter struct {
	state.UnimplementedWaiter

	mu       sync.Mutex
	due      int // waits FireDueWaits still has to fire
	expired  int64
	pending  []*starflowtype.Wait
	marks    []state.MarkNotifiedParams
	fireArgs []int
}

func (f *fakeWaiter) FireDueWaits(_ context.Context, p *state.FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fireArgs = append(f.fireArgs, p.Limit)
	n := min(p.Limit, f.due)
	f.due -= n
	out := make([]*starflowtype.Wait, n)
	for i := range out {
		out[i] = &starflowtype.Wait{ID: "w", Status: starflowtype.WaitWoken}
	}
	return out, nil
}

func (f *fakeWaiter) DeleteExpiredSessionVars(_ context.Context, p *state.DeleteExpiredSessionVarsParams) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(int64(p.Limit), f.expired)
	f.expired -= n
	return n, nil
}

func (f *fakeWaiter) PendingNotifies(context.Context, *state.PendingNotifiesParams) ([]*starflowtype.Wait, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending, nil
}

func (f *fakeWaiter) MarkNotified(_ context.Context, p *state.MarkNotifiedParams) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marks = append(f.marks, *p)
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestTimerPassRepeatsFullBatchesAndNudgesOnce(t *testing.T) {
	f := &fakeWaiter{due: 1001}
	nudges := 0
	p := NewTimerPoller(f, TimerConfig{BatchLimit: 500, Logger: quiet(), OnRequeue: func() { nudges++ }})
	got, err := p.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1001 || len(f.fireArgs) != 3 || nudges != 1 {
		t.Fatalf("fired %d in %d calls, %d nudges; want 1001 in 3 calls, 1 nudge", len(got), len(f.fireArgs), nudges)
	}
	got, err = p.Pass(context.Background())
	if err != nil || len(got) != 0 || nudges != 1 {
		t.Fatalf("idle pass: %d fired, err %v, %d nudges (want no nudge)", len(got), err, nudges)
	}
}

func TestSessionGCPassCountsAllBatches(t *testing.T) {
	f := &fakeWaiter{expired: 2500}
	g := NewSessionGC(f, SessionGCConfig{BatchLimit: 1000, Logger: quiet()})
	n, err := g.Pass(context.Background())
	if err != nil || n != 2500 {
		t.Fatalf("removed %d (%v), want 2500", n, err)
	}
}

func TestNotifyPassBacksOffByTries(t *testing.T) {
	f := &fakeWaiter{pending: []*starflowtype.Wait{
		{ID: "ok", RunID: "r1"},
		{ID: "fails-first", RunID: "r2"},
		{ID: "fails-fourth", RunID: "r3", NotifyTries: 3},
	}}
	n, err := NewNotifyRetrier(f, NotifyConfig{
		RetryMin: time.Second, RetryMax: 5 * time.Second, Logger: quiet(),
		Deliver: func(_ context.Context, w *starflowtype.Wait) error {
			if w.ID == "ok" {
				return nil
			}
			return errors.New("503")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Pass(context.Background())
	if err != nil || res.Delivered != 1 || res.Failed != 2 {
		t.Fatalf("result %+v, %v", res, err)
	}
	marks := map[string]state.MarkNotifiedParams{}
	for _, m := range f.marks {
		marks[m.WaitID] = m
	}
	if m := marks["ok"]; !m.Delivered || m.RetryIn != 0 {
		t.Errorf("delivered wait marked %+v", m)
	}
	// First failure: 1 s ± 20%. Fourth: 1 s × 2³ = 8 s, capped at 5 s ± 20%.
	if m := marks["fails-first"]; m.Delivered || m.RetryIn < 800*time.Millisecond || m.RetryIn > 1200*time.Millisecond {
		t.Errorf("first failure marked %+v, want retry in 1 s ± 20%%", m)
	}
	if m := marks["fails-fourth"]; m.Delivered || m.RetryIn < 4*time.Second || m.RetryIn > 6*time.Second {
		t.Errorf("fourth failure marked %+v, want retry in 5 s (cap) ± 20%%", m)
	}
}

func TestNotifyInterruptedByStopIsNotCounted(t *testing.T) {
	f := &fakeWaiter{pending: []*starflowtype.Wait{{ID: "slow", RunID: "r"}}}
	started := make(chan struct{})
	n, err := NewNotifyRetrier(f, NotifyConfig{Logger: quiet(), Deliver: func(ctx context.Context, _ *starflowtype.Wait) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(context.Background()); err != nil { // twice is safe
		t.Fatal(err)
	}
	if len(f.marks) != 0 {
		t.Fatalf("a delivery cut short by Stop was recorded: %+v", f.marks)
	}
}

func TestNotifyRequiresDeliver(t *testing.T) {
	if _, err := NewNotifyRetrier(&fakeWaiter{}, NotifyConfig{}); err == nil {
		t.Fatal("no error without Deliver")
	}
}

func TestPeriodicTriggerAndDoubleStart(t *testing.T) {
	passes := make(chan struct{}, 10)
	p := newPeriodic("test", time.Hour, quiet(), func(context.Context) error {
		passes <- struct{}{}
		return nil
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	<-passes // the pass at Start
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("second Start did not fail")
	}
	p.Trigger()
	select {
	case <-passes:
	case <-time.After(30 * time.Second):
		t.Fatal("Trigger did not run a pass")
	}
}

// TestPassesEndWhenTheStoreKeepsReturningFullBatches: a store that never
// runs dry (a bug, or waits falling due faster than one pass clears them)
// cannot keep a pass going for ever.
func TestPassesEndWhenTheStoreKeepsReturningFullBatches(t *testing.T) {
	f := &fakeWaiter{due: 1 << 30, expired: 1 << 40}
	p := NewTimerPoller(f, TimerConfig{BatchLimit: 10, Logger: quiet()})
	fired, err := p.Pass(context.Background())
	if err != nil || len(fired) != 10*maxBatchesPerPass || len(f.fireArgs) != maxBatchesPerPass {
		t.Fatalf("fired %d in %d calls (%v); want %d in %d", len(fired), len(f.fireArgs), err, 10*maxBatchesPerPass, maxBatchesPerPass)
	}
	n, err := NewSessionGC(f, SessionGCConfig{BatchLimit: 10, Logger: quiet()}).Pass(context.Background())
	if err != nil || n != 10*maxBatchesPerPass {
		t.Fatalf("GC removed %d (%v), want %d", n, err, 10*maxBatchesPerPass)
	}
}
