package httpserver

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the per-client rate limit on POST /wake/{token}.
const (
	// WakeRateDefault is Config.WakeRate: wakes per second per client.
	WakeRateDefault = 10.0
	// WakeBurstDefault is Config.WakeBurst: wakes a client may send at
	// once before the rate applies.
	WakeBurstDefault = 20
	// WakeClientsMax bounds how many clients have a limiter of their own.
	// Past it (after the idle ones are evicted), new clients share one
	// limiter, so a flood of source addresses costs bounded memory
	// (about 200 bytes per client: 2 MB at most).
	WakeClientsMax = 10000
)

// limiterSweepEvery is how often, at most, the client table is swept of
// limiters that are full again.
const limiterSweepEvery = 10 * time.Second

// clientLimiter is a token bucket per client key (golang.org/x/time/rate).
// A limiter whose bucket has refilled to its burst is indistinguishable
// from a new one, so it is evicted: no client loses anything, and the
// table holds only clients seen within about burst/rate seconds.
type clientLimiter struct {
	limit rate.Limit
	burst int
	max   int
	now   func() time.Time

	mu        sync.Mutex
	clients   map[string]*rate.Limiter
	shared    *rate.Limiter // for new clients while the table is full
	lastSweep time.Time
}

// newClientLimiter allows perSecond events per second per key with bursts
// of burst, for at most max keys of their own.
func newClientLimiter(perSecond float64, burst, max int, now func() time.Time) *clientLimiter {
	return &clientLimiter{
		limit: rate.Limit(perSecond), burst: burst, max: max, now: now,
		clients: map[string]*rate.Limiter{}, shared: rate.NewLimiter(rate.Limit(perSecond), burst),
	}
}

// allow takes one token from key's bucket. When the bucket is empty it
// takes nothing and returns how long until a token is available.
func (c *clientLimiter) allow(key string) (ok bool, retryAfter time.Duration) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.lastSweep) >= limiterSweepEvery || (len(c.clients) >= c.max && c.clients[key] == nil) {
		c.sweep(now)
	}
	lim := c.clients[key]
	if lim == nil {
		if len(c.clients) < c.max {
			lim = rate.NewLimiter(c.limit, c.burst)
			c.clients[key] = lim
		} else {
			lim = c.shared
		}
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep evicts the limiters whose bucket is full again. c.mu is held.
func (c *clientLimiter) sweep(now time.Time) {
	c.lastSweep = now
	for k, lim := range c.clients {
		if lim.TokensAt(now) >= float64(c.burst) {
			delete(c.clients, k)
		}
	}
}

// size is the number of clients with a limiter of their own.
func (c *clientLimiter) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// retryAfterSeconds is a Retry-After value: d rounded up to whole
// seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// clientKey is the rate-limit key of r: the client's IP address (an IPv6
// address by its /64, which one client usually holds whole). With header
// set (a reverse proxy's X-Forwarded-For or X-Real-IP) and a loopback
// peer, the last address in that header — the one the nearest proxy
// appended — is the client; a header that holds no address falls back to
// the peer.
func clientKey(r *http.Request, header string) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	ip, err := netip.ParseAddr(peer)
	if err != nil {
		return peer
	}
	if header != "" && ip.IsLoopback() {
		if vs := r.Header.Values(header); len(vs) > 0 {
			parts := strings.Split(vs[len(vs)-1], ",")
			last := strings.TrimSpace(parts[len(parts)-1])
			if fwd, err := netip.ParseAddr(last); err == nil {
				ip = fwd
			} else if fwd, err := netip.ParseAddrPort(last); err == nil {
				ip = fwd.Addr()
			}
		}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}
