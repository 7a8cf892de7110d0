package memory_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
	"github.com/starflow/starflow/warm/warmtest"
)

func TestConformance(t *testing.T) {
	warmtest.Run(t, func(t *testing.T) warm.Store { return memory.New() })
}

// TestPresenceExpiryByClock drives the clock: an entry is listed strictly
// before its deadline and gone at it.
func TestPresenceExpiryByClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.NewWithClock(func() time.Time { return now })
	ctx := context.Background()
	if err := s.PutPresence(ctx, &warm.Presence{RunnerID: "r"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(9 * time.Second)
	if ps, _ := s.ListPresence(ctx); len(ps) != 1 {
		t.Fatalf("listed %d before the deadline, want 1", len(ps))
	}
	now = now.Add(time.Second)
	if ps, _ := s.ListPresence(ctx); len(ps) != 0 {
		t.Fatalf("listed %d at the deadline, want 0", len(ps))
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
