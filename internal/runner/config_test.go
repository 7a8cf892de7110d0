package runner

import (
	"strings"
	"testing"
	"time"
)

// TestHeartbeatBound: a heartbeat of at most half the lease TTL is
// accepted; more is refused with the largest allowed value and the
// reason; a heartbeat left out adapts to a short TTL.
func TestHeartbeatBound(t *testing.T) {
	for _, c := range []struct {
		ttl, heartbeat time.Duration
		ok             bool
	}{
		{30 * time.Second, 10 * time.Second, true},
		{30 * time.Second, 15 * time.Second, true},
		{30 * time.Second, 15*time.Second + 1, false},
		{30 * time.Second, 27 * time.Second, false},
		{time.Second, time.Second, false},
	} {
		err := Config{LeaseTTL: c.ttl, Heartbeat: c.heartbeat, PollInterval: time.Second, Concurrency: 1}.Validate()
		if c.ok != (err == nil) {
			t.Errorf("TTL %s heartbeat %s: %v", c.ttl, c.heartbeat, err)
		}
		if err != nil && !strings.Contains(err.Error(), "at most "+(c.ttl/2).String()) {
			t.Errorf("TTL %s heartbeat %s: %q does not give the largest heartbeat allowed", c.ttl, c.heartbeat, err)
		}
	}
	for ttl, want := range map[time.Duration]time.Duration{
		30 * time.Second: 10 * time.Second, 20 * time.Second: 10 * time.Second,
		15 * time.Second: 5 * time.Second, 3 * time.Second: time.Second,
	} {
		c := Config{LeaseTTL: ttl}.WithDefaults()
		if c.Heartbeat != want {
			t.Errorf("TTL %s: default heartbeat %s, want %s", ttl, c.Heartbeat, want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("TTL %s: defaults refused: %v", ttl, err)
		}
	}
}
