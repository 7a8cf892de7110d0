package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestClientLimiterPerKey: a key gets its burst, then is refused with the
// time until its next token, while another key is unaffected; a refused
// attempt takes nothing; the bucket refills at the rate.
func TestClientLimiterPerKey(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newClientLimiter(10, 20, 100, clk.now)
	for i := range 20 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("request %d of a burst of 20 refused", i+1)
		}
	}
	ok, wait := l.allow("a")
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("21st request: ok=%v wait=%s, want refused for about 100ms", ok, wait)
	}
	for i := range 20 {
		if ok, _ := l.allow("b"); !ok {
			t.Fatalf("another client refused at request %d", i+1)
		}
	}
	// Refusals take nothing: after 100 ms exactly one more is allowed.
	for range 5 {
		l.allow("a")
	}
	clk.advance(100 * time.Millisecond)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("a token earned back was not available (refusals consumed tokens)")
	}
	if ok, _ := l.allow("a"); ok {
		t.Fatal("two requests allowed after one token's time")
	}
}

// TestClientLimiterBoundedMemory: a flood of distinct keys never holds
// more than max limiters; past it new keys share one limiter; limiters
// whose bucket has refilled are evicted, so the table empties once the
// flood stops — and an evicted key starts again with a full burst, as it
// would have anyway.
func TestClientLimiterBoundedMemory(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newClientLimiter(10, 2, 50, clk.now)
	allowed := 0
	for i := range 1000 {
		if ok, _ := l.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256)); ok {
			allowed++
		}
		if n := l.size(); n > 50 {
			t.Fatalf("after %d keys the table holds %d limiters, max 50", i+1, n)
		}
	}
	// 50 own limiters, then the shared one's burst of 2 (plus what it
	// earned back while the clock stood still: nothing).
	if allowed != 52 {
		t.Fatalf("%d of 1000 distinct clients allowed, want 50 + a shared burst of 2", allowed)
	}
	clk.advance(time.Second) // 2 tokens at 10/s refill in 200 ms
	if ok, _ := l.allow("fresh"); !ok {
		t.Fatal("a new client refused after the flood's limiters refilled")
	}
	if n := l.size(); n != 1 {
		t.Fatalf("after a sweep the table holds %d limiters, want only the fresh client's", n)
	}
}

// TestClientLimiterSweepKeepsBusyClients: the periodic sweep evicts only
// full buckets, never one a client is draining.
func TestClientLimiterSweepKeepsBusyClients(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newClientLimiter(1, 3, 100, clk.now)
	l.allow("idle") // the first call sweeps (nothing) and starts the period
	clk.advance(limiterSweepEvery - 100*time.Millisecond)
	for range 3 {
		if ok, _ := l.allow("busy"); !ok {
			t.Fatal("busy's burst refused")
		}
	}
	clk.advance(100 * time.Millisecond) // a sweep is due: idle is full, busy is not
	if ok, _ := l.allow("busy"); ok {
		t.Fatal("busy's 4th request in a burst of 3 allowed: the sweep dropped its limiter")
	}
	if n := l.size(); n != 1 {
		t.Fatalf("%d limiters after the sweep, want 1 (busy; idle evicted)", n)
	}
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, remote, header, value, want string
	}{
		{"ipv4 peer", "192.0.2.7:5555", "", "", "192.0.2.7"},
		{"ipv6 peer by /64", "[2001:db8:1:2:3:4:5:6]:5555", "", "", "2001:db8:1:2::/64"},
		{"same /64", "[2001:db8:1:2:ffff::1]:1", "", "", "2001:db8:1:2::/64"},
		{"mapped ipv4", "[::ffff:192.0.2.7]:5555", "", "", "192.0.2.7"},
		{"header ignored when not configured", "127.0.0.1:5555", "", "198.51.100.1", "127.0.0.1"},
		{"forwarded from loopback", "127.0.0.1:5555", "X-Forwarded-For", "203.0.113.9, 198.51.100.1", "198.51.100.1"},
		{"forwarded with a port", "[::1]:5555", "X-Forwarded-For", "198.51.100.1:443", "198.51.100.1"},
		{"forwarded junk", "127.0.0.1:5555", "X-Forwarded-For", "unknown", "127.0.0.1"},
		{"forwarded from elsewhere is not trusted", "192.0.2.7:5555", "X-Forwarded-For", "198.51.100.1", "192.0.2.7"},
		{"real ip header", "127.0.0.1:1", "X-Real-IP", "2001:db8::1", "2001:db8::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/wake/x", nil)
			r.RemoteAddr = tc.remote
			header := ""
			if tc.value != "" {
				h := tc.header
				if h == "" {
					h = "X-Forwarded-For"
				}
				r.Header.Set(h, tc.value)
				header = tc.header
			}
			if got := clientKey(r, header); got != tc.want {
				t.Fatalf("clientKey = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWakeRateLimit: POST /wake/{token} past a client's burst is 429 with
// Retry-After and a problem document, before the backend is called,
// while a second client (told apart by the proxy header) is unaffected;
// after Retry-After the first client is served again.
func TestWakeRateLimit(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	b := &wakeBackend{}
	h, err := New(Config{Backend: &fakeBackend{wakeFn: b.wake}, WakeRate: 2, WakeBurst: 3, ClientIPHeader: "X-Forwarded-For", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(client string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/wake/forged", nil)
		req.Header.Set("X-Forwarded-For", client)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var p map[string]any
		_ = json.NewDecoder(res.Body).Decode(&p)
		if res.StatusCode == 429 && (p["status"] != 429.0 || p["title"] != "too many requests" || res.Header.Get("Content-Type") != "application/problem+json") {
			t.Fatalf("429 answer is not a problem document: %v", p)
		}
		return res
	}
	for i := range 3 {
		if res := post("198.51.100.1"); res.StatusCode != 401 {
			t.Fatalf("request %d within the burst: %d", i+1, res.StatusCode)
		}
	}
	res := post("198.51.100.1")
	if res.StatusCode != 429 {
		t.Fatalf("request past the burst: %d, want 429", res.StatusCode)
	}
	secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || secs != 1 {
		t.Fatalf("Retry-After %q, want 1 (a token in 500 ms, rounded up)", res.Header.Get("Retry-After"))
	}
	if b.calls != 3 {
		t.Fatalf("a limited request reached the backend: %d calls", b.calls)
	}
	for i := range 3 {
		if res := post("198.51.100.2"); res.StatusCode != 401 {
			t.Fatalf("second client's request %d: %d, want it unaffected", i+1, res.StatusCode)
		}
	}
	clk.advance(time.Duration(secs) * time.Second)
	if res := post("198.51.100.1"); res.StatusCode != 401 {
		t.Fatalf("after Retry-After: %d", res.StatusCode)
	}
}

// TestWakeRateLimitOff: a negative WakeRate turns the limit off.
func TestWakeRateLimitOff(t *testing.T) {
	t.Parallel()
	h, err := New(Config{Backend: &fakeBackend{wakeFn: (&wakeBackend{}).wake}, WakeRate: -1, WakeBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for i := range 50 {
		if a := do(t, srv, "POST", "/wake/forged", "", ""); a.code != 401 {
			t.Fatalf("request %d: %d", i+1, a.code)
		}
	}
	if _, err := New(Config{Backend: &fakeBackend{}, WakeBurst: -1}); err == nil {
		t.Fatal("a negative WakeBurst accepted")
	}
}
