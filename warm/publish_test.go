package warm_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingStore records PutPresence ttls, can fail every call, and can
// hold PutProgress until released.
type recordingStore struct {
	*memory.Store
	fail atomic.Bool
	hold chan struct{} // nil: PutProgress does not wait

	mu   sync.Mutex
	ttls []time.Duration
}

var errDown = errors.New("store down (test)")

func (s *recordingStore) PutPresence(ctx context.Context, p *warm.Presence, ttl time.Duration) error {
	s.mu.Lock()
	s.ttls = append(s.ttls, ttl)
	s.mu.Unlock()
	if s.fail.Load() {
		return errDown
	}
	return s.Store.PutPresence(ctx, p, ttl)
}

func (s *recordingStore) PutProgress(ctx context.Context, p *warm.Progress) error {
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.PutProgress(ctx, p)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPresencePublisher(t *testing.T) {
	st := &recordingStore{Store: memory.New()}
	var held atomic.Int64
	pub, err := warm.NewPresencePublisher(warm.PresencePublisherConfig{
		Store: st, Interval: 10 * time.Millisecond,
		Info: func() warm.Presence {
			return warm.Presence{RunnerID: "runner-1", Pools: []string{"default"}, RunsHeld: int(held.Load())}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pub.Start(ctx)
	pub.Start(ctx) // no second loop
	listed := func(runsHeld int) bool {
		ps, err := st.ListPresence(ctx)
		return err == nil && len(ps) == 1 && ps[0].RunnerID == "runner-1" && ps[0].RunsHeld == runsHeld && !ps[0].LastBeat.IsZero()
	}
	waitFor(t, "the first presence", func() bool { return listed(0) })
	held.Store(3)
	waitFor(t, "a presence with the new info", func() bool { return listed(3) })
	pub.Stop()
	pub.Stop()
	waitFor(t, "the runner to leave the list after Stop", func() bool {
		ps, err := st.ListPresence(ctx)
		return err == nil && len(ps) == 0
	})
	st.mu.Lock()
	ttls := append([]time.Duration(nil), st.ttls...)
	st.mu.Unlock()
	for _, ttl := range ttls[:len(ttls)-1] {
		if ttl != 30*time.Millisecond {
			t.Fatalf("published with ttl %v, want 3 × interval = 30ms", ttl)
		}
	}
	if last := ttls[len(ttls)-1]; last > time.Millisecond {
		t.Fatalf("the leaving publication has ttl %v, want ≤ 1ms", last)
	}
	if pub.Published() < 3 || pub.Failed() != 0 {
		t.Fatalf("published %d failed %d", pub.Published(), pub.Failed())
	}
}

func TestPresencePublisherKeepsGoingOnErrors(t *testing.T) {
	st := &recordingStore{Store: memory.New()}
	st.fail.Store(true)
	var errs atomic.Int64
	pub, err := warm.NewPresencePublisher(warm.PresencePublisherConfig{
		Store: st, Interval: 5 * time.Millisecond, TTL: time.Second,
		Info: func() warm.Presence { return warm.Presence{RunnerID: "r"} },
		OnError: func(err error) {
			if errors.Is(err, errDown) {
				errs.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pub.Start(context.Background())
	defer pub.Stop()
	waitFor(t, "three reported failures", func() bool { return errs.Load() >= 3 && pub.Failed() >= 3 })
	st.fail.Store(false)
	waitFor(t, "publishing to resume", func() bool {
		ps, _ := st.ListPresence(context.Background())
		return len(ps) == 1
	})
}

func TestPresencePublisherConfigErrors(t *testing.T) {
	st := memory.New()
	info := func() warm.Presence { return warm.Presence{RunnerID: "r"} }
	for name, c := range map[string]warm.PresencePublisherConfig{
		"no store":        {Info: info},
		"no info":         {Store: st},
		"negative":        {Store: st, Info: info, Interval: -1},
		"ttl <= interval": {Store: st, Info: info, Interval: time.Second, TTL: time.Second},
	} {
		if _, err := warm.NewPresencePublisher(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	p, err := warm.NewPresencePublisher(warm.PresencePublisherConfig{Store: st, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop() // before Start: nothing to do
	p.Start(context.Background())
	if p.Published() != 0 {
		t.Fatal("Start after Stop published")
	}
}

// TestProgressSinkNeverBlocks: with the store stuck, Report still returns
// at once; the overflow is dropped and counted, the rest written once the
// store answers.
func TestProgressSinkNeverBlocks(t *testing.T) {
	st := &recordingStore{Store: memory.New(), hold: make(chan struct{})}
	var onDrop atomic.Int64
	sink, err := warm.NewProgressSink(warm.ProgressSinkConfig{Store: st, Queue: 4, Timeout: time.Minute,
		OnDrop: func(p *warm.Progress, err error) { onDrop.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	sink.Start(context.Background())
	defer sink.Stop()
	const n = 1000
	for i := range n {
		sink.Report("run", "/", "a", float64(i)/n, "working")
	}
	// At most Queue waiting plus one in the writer's hands.
	if d := sink.Dropped(); d < n-5 {
		t.Fatalf("dropped %d of %d with a stuck store and a queue of 4", d, n)
	}
	close(st.hold)
	waitFor(t, "every report written or dropped", func() bool { return sink.Written()+sink.Dropped() == n })
	if onDrop.Load() != sink.Dropped() {
		t.Fatalf("OnDrop called %d times, Dropped %d", onDrop.Load(), sink.Dropped())
	}
	ps, err := st.ListProgress(context.Background(), "run")
	if err != nil || len(ps) != 1 || ps[0].Message != "working" || ps[0].At.IsZero() {
		t.Fatalf("ListProgress = %+v, %v", ps, err)
	}
}

func TestProgressSinkClampsAndStops(t *testing.T) {
	st := memory.New()
	sink, err := warm.NewProgressSink(warm.ProgressSinkConfig{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sink.Start(context.Background())
	ctx := context.Background()
	for _, tc := range []struct {
		step string
		in   float64
		want float64
	}{{"over", 7, 1}, {"under", -0.5, 0}, {"nan", math.NaN(), 0}, {"ok", 0.25, 0.25}} {
		sink.Report("r", "/", tc.step, tc.in, "")
		waitFor(t, "report "+tc.step, func() bool {
			ps, _ := st.ListProgress(ctx, "r")
			for _, p := range ps {
				if p.StepID == tc.step {
					if p.Fraction != tc.want {
						t.Fatalf("%s: stored fraction %v, want %v", tc.step, p.Fraction, tc.want)
					}
					return true
				}
			}
			return false
		})
	}
	sink.Stop()
	sink.Stop()
	before := sink.Dropped()
	sink.Report("r", "/", "late", 0.5, "")
	if sink.Dropped() != before+1 {
		t.Fatal("a report after Stop was not dropped")
	}
	if _, err := warm.NewProgressSink(warm.ProgressSinkConfig{}); err == nil {
		t.Fatal("NewProgressSink without a store: no error")
	}
}

// The store errors are reported to OnDrop with the error.
func TestProgressSinkStoreErrors(t *testing.T) {
	st := memory.New()
	_ = st.Close() // every call fails
	got := make(chan error, 1)
	sink, err := warm.NewProgressSink(warm.ProgressSinkConfig{Store: st, OnDrop: func(p *warm.Progress, err error) {
		select {
		case got <- err:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	sink.Start(context.Background())
	defer sink.Stop()
	sink.Report("r", "/", "a", 0.5, "")
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("OnDrop got a nil error for a store failure")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnDrop not called for a store failure")
	}
}
