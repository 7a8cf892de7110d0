package maintenance

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// terms records the maintenance services of every candidate: how many
// run right now (never more than one may) and how many terms began.
type terms struct {
	mu        sync.Mutex
	active    int
	maxActive int
	begun     int
	by        []string
}

// service is a Service of owner that records its start and stop in r.
type service struct {
	r     *terms
	owner string
}

func (s *service) Start(context.Context) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.active++
	s.r.begun++
	s.r.maxActive = max(s.r.maxActive, s.r.active)
	s.r.by = append(s.r.by, s.owner)
	return nil
}

func (s *service) Stop(context.Context) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.active--
	return nil
}

func (r *terms) snapshot() (active, maxActive, begun int, by []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active, r.maxActive, r.begun, append([]string(nil), r.by...)
}

func newTestLeader(t *testing.T, e state.Elector, owner string, r *terms, ttl time.Duration) *Leader {
	t.Helper()
	l, err := NewLeader(e, LeaderConfig{Owner: owner, TTL: ttl, Logger: quiet(),
		Services: func() ([]Service, error) { return []Service{&service{r: r, owner: owner}}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	return l
}

// waitUntil polls cond every 10 ms for up to d; returns how long it took,
// failing t when it never held.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func openShared(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLeaderOneAtATime: two candidates on one SQLite file (two Stores,
// as two processes); one leads and runs the services, the other waits
// past several TTLs; stopping the leader hands over within a retry
// interval; at no moment do both run their services; Stop is idempotent.
func TestLeaderOneAtATime(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	const ttl = time.Second
	r := &terms{}
	a := newTestLeader(t, openShared(t, path), "a", r, ttl)
	b := newTestLeader(t, openShared(t, path), "b", r, ttl)
	waitUntil(t, 5*time.Second, "a leader", func() bool { return a.Leading() || b.Leading() })
	leader, other := a, b
	if b.Leading() {
		leader, other = b, a
	}
	time.Sleep(3 * ttl) // the leader renews; the other keeps campaigning
	if !leader.Leading() || other.Leading() {
		t.Fatalf("after 3 TTLs: leader leading %v, other leading %v", leader.Leading(), other.Leading())
	}
	if err := leader.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := leader.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	if leader.Leading() {
		t.Fatal("a stopped Leader says it leads")
	}
	if d := waitUntil(t, 5*time.Second, "the other to take over", other.Leading); d > ttl/5+time.Second {
		t.Errorf("the other took over %s after the leader stopped, want within a retry interval (%s) and some slack", d, ttl/5)
	}
	if err := other.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	active, maxActive, begun, by := r.snapshot()
	if active != 0 || maxActive != 1 || begun != 2 {
		t.Fatalf("services: %d active at the end, at most %d at once, %d terms (%v); want 0, 1, 2", active, maxActive, begun, by)
	}
}

// TestLeaderDeadLeaderReplaced: the leader's store stops answering (its
// file handle closed: as good as a dead process for the others); it gives
// its term up and stops its services, and the other candidate takes over
// within the TTL and a retry interval — never both at once.
func TestLeaderDeadLeaderReplaced(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	const ttl = time.Second
	r := &terms{}
	sa := openShared(t, path)
	a := newTestLeader(t, sa, "a", r, ttl)
	waitUntil(t, 5*time.Second, "a to lead", a.Leading)
	b := newTestLeader(t, openShared(t, path), "b", r, ttl)
	died := time.Now()
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	d := waitUntil(t, 10*time.Second, "b to take over", b.Leading)
	if d > ttl+ttl/5+time.Second {
		t.Errorf("b took over %s after a died, want within TTL + TTL/5 and some slack", d)
	}
	if a.Leading() {
		t.Error("a still says it leads after its store died")
	}
	if _, maxActive, _, by := r.snapshot(); maxActive != 1 {
		t.Fatalf("%d candidates ran maintenance at once (terms %v)", maxActive, by)
	}
	t.Logf("b took over %s after a died", time.Since(died).Round(time.Millisecond))
}

// TestLeaderWithoutElector: over a store that elects no one, the Leader
// leads at once and stops its services on Stop.
func TestLeaderWithoutElector(t *testing.T) {
	t.Parallel()
	r := &terms{}
	var changes []bool
	var mu sync.Mutex
	l, err := NewLeader(nil, LeaderConfig{Owner: "solo", Logger: quiet(),
		Services: func() ([]Service, error) { return []Service{&service{r: r, owner: "solo"}}, nil },
		OnChange: func(v bool) { mu.Lock(); changes = append(changes, v); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err == nil {
		t.Fatal("a second Start succeeded")
	}
	waitUntil(t, 5*time.Second, "leading", l.Leading)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if active, _, begun, _ := r.snapshot(); active != 0 || begun != 1 || len(changes) != 2 || !changes[0] || changes[1] {
		t.Fatalf("active %d, terms %d, changes %v; want 0, 1, [true false]", active, begun, changes)
	}
}

// TestLeaderServicesThatCannotStart: when the services cannot be built,
// the Leader gives the leadership up (another candidate may do better)
// and tries again later; it never says it leads.
func TestLeaderServicesThatCannotStart(t *testing.T) {
	t.Parallel()
	s := openShared(t, filepath.Join(t.TempDir(), "l.db"))
	var tries atomic.Int32
	l, err := NewLeader(s, LeaderConfig{Owner: "x", TTL: time.Second, Logger: quiet(),
		Services: func() ([]Service, error) { tries.Add(1); return nil, errors.New("no") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	waitUntil(t, 5*time.Second, "two tries", func() bool { return tries.Load() >= 2 })
	if l.Leading() {
		t.Fatal("leading without services")
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM leader_leases`).Scan(&n); err != nil || n > 1 {
		t.Fatalf("leader_leases rows: %d, %v", n, err)
	}
}

// TestNewLeaderChecksConfig: a missing owner or services, or a TTL below
// the minimum, is refused.
func TestNewLeaderChecksConfig(t *testing.T) {
	svc := func() ([]Service, error) { return nil, nil }
	for _, c := range []LeaderConfig{{Services: svc}, {Owner: "o"}, {Owner: "o", Services: svc, TTL: time.Millisecond}} {
		if _, err := NewLeader(nil, c); err == nil {
			t.Errorf("NewLeader(%+v) accepted", c)
		}
	}
}
