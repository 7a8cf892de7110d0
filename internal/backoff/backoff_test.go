package backoff

import (
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 20: time.Minute} {
		for range 100 {
			d := Exponential(time.Second, time.Minute, 2, n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("n=%d: %s outside ±20%% of %s", n, d, want)
			}
		}
	}
}
