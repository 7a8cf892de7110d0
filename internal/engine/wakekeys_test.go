package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// keyStore is a state.Adapter that only holds wake keys and counts how
// often they are read. Any other method panics (the nil embedded Adapter):
// the key ring must need nothing else.
type keyStore struct {
	state.Adapter
	mu    sync.Mutex
	keys  []state.WakeKey
	reads int
}

func (s *keyStore) WakeKeys(context.Context) ([]state.WakeKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	out := make([]state.WakeKey, len(s.keys))
	copy(out, s.keys)
	return out, nil
}

func (s *keyStore) AddWakeKey(_ context.Context, k state.WakeKey) (state.WakeKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.keys {
		if have.ID == k.ID {
			return have, nil
		}
	}
	s.keys = append([]state.WakeKey{k}, s.keys...)
	return k, nil
}

func (s *keyStore) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// A token naming an unknown key reloads the stored keys at most once per
// KeyReloadInterval, however many such tokens arrive; a key another
// process added is found after the interval.
func TestVerifyTokenUnknownKeyReloadIsRateLimited(t *testing.T) {
	ctx := context.Background()
	stored, err := waketoken.Generate("k1")
	if err != nil {
		t.Fatal(err)
	}
	st := &keyStore{keys: []state.WakeKey{{ID: stored.ID, Secret: stored.Secret}}}
	var mu sync.Mutex
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e, err := New(Config{Store: st, Now: clock})
	if err != nil {
		t.Fatal(err)
	}

	// A genuine token loads the ring once.
	good := waketoken.Sign(stored, "run-1", "wait-1", clock().Add(time.Hour))
	if _, err := e.VerifyToken(ctx, good); err != nil {
		t.Fatalf("token of the stored key: %v", err)
	}
	if n := st.readCount(); n != 1 {
		t.Fatalf("store reads after the first token: %d, want 1", n)
	}

	// 100 forged tokens naming an unknown key: refused, and no reload
	// within the interval of the first load.
	rogue, _ := waketoken.Generate("rogue")
	forged := waketoken.Sign(rogue, "run-1", "wait-1", clock().Add(time.Hour))
	for i := range 100 {
		_, err := e.VerifyToken(ctx, forged)
		if !errors.Is(err, starflowtype.ErrTokenInvalid) {
			t.Fatalf("forged token %d: %v, want ErrTokenInvalid", i, err)
		}
	}
	if n := st.readCount(); n != 1 {
		t.Fatalf("store reads after 100 tokens of an unknown key within %s: %d, want 1 (no reload)", KeyReloadInterval, n)
	}

	// Past the interval one reload is granted, then none again for the
	// next interval.
	advance(KeyReloadInterval)
	for range 50 {
		if _, err := e.VerifyToken(ctx, forged); !errors.Is(err, starflowtype.ErrTokenInvalid) {
			t.Fatalf("forged token: %v", err)
		}
	}
	if n := st.readCount(); n != 2 {
		t.Fatalf("store reads after the interval: %d, want 2 (one reload)", n)
	}

	// A key another process stored: seen once the interval has passed.
	other, _ := waketoken.Generate("k2")
	if _, err := st.AddWakeKey(ctx, state.WakeKey{ID: other.ID, Secret: other.Secret}); err != nil {
		t.Fatal(err)
	}
	fresh := waketoken.Sign(other, "run-2", "wait-2", clock().Add(time.Hour))
	if _, err := e.VerifyToken(ctx, fresh); !errors.Is(err, waketoken.ErrUnknownKey) {
		t.Fatalf("token of a key added within the interval: %v, want ErrUnknownKey until the next reload", err)
	}
	advance(KeyReloadInterval + time.Second)
	if _, err := e.VerifyToken(ctx, fresh); err != nil {
		t.Fatalf("token of a key added by another process, after the interval: %v", err)
	}
	if n := st.readCount(); n != 3 {
		t.Errorf("store reads: %d, want 3", n)
	}
	// The genuine token never needed a reload.
	if _, err := e.VerifyToken(ctx, good); err != nil {
		t.Fatalf("token of the first key: %v", err)
	}
	if n := st.readCount(); n != 3 {
		t.Errorf("store reads after a known key's token: %d, want 3", n)
	}
}
