package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// keyStore is a state.Adapter that only registers wake keys (ids and
// fingerprints; the first fingerprint of an id stays). Any other method
// panics (the nil embedded Adapter): the key ring must need nothing else.
type keyStore struct {
	state.Adapter
	mu   sync.Mutex
	keys []state.WakeKey
}

func (s *keyStore) WakeKeys(context.Context) ([]state.WakeKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]state.WakeKey(nil), s.keys...), nil
}

func (s *keyStore) AddWakeKey(_ context.Context, k state.WakeKey) (state.WakeKey, error) {
	if err := state.CheckWakeKey(k); err != nil {
		return state.WakeKey{}, err
	}
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

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A token naming a key the ring lacks reads the key file again at most
// once per KeyReloadInterval, however many such tokens arrive: a key added
// to the file (a rotation, or another process generating it) is refused
// until the interval has passed, then verifies.
func TestVerifyTokenUnknownKeyReloadIsRateLimited(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "starflow.db.wakekeys")
	k1, _ := waketoken.Generate("k1")
	if _, err := waketoken.AddToKeyFile(file, []waketoken.Key{k1}, nil); err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	e, err := New(Config{Store: &keyStore{}, Now: clock.Now, WakeKeyFile: file})
	if err != nil {
		t.Fatal(err)
	}
	good := waketoken.Sign(k1, "run-1", "wait-1", clock.Now().Add(time.Hour))
	if _, err := e.VerifyToken(ctx, good); err != nil {
		t.Fatalf("token of the file's key: %v", err)
	}

	// Tokens of unknown keys within the interval of the first read: refused.
	rogue, _ := waketoken.Generate("rogue")
	forged := waketoken.Sign(rogue, "run-1", "wait-1", clock.Now().Add(time.Hour))
	for i := range 100 {
		if _, err := e.VerifyToken(ctx, forged); !errors.Is(err, starflowtype.ErrTokenInvalid) {
			t.Fatalf("forged token %d: %v, want ErrTokenInvalid", i, err)
		}
	}
	k2, _ := waketoken.Generate("k2")
	if _, err := waketoken.AddToKeyFile(file, []waketoken.Key{k2}, nil); err != nil {
		t.Fatal(err)
	}
	fresh := waketoken.Sign(k2, "run-2", "wait-2", clock.Now().Add(time.Hour))
	if _, err := e.VerifyToken(ctx, fresh); !errors.Is(err, waketoken.ErrUnknownKey) {
		t.Fatalf("token of a key added within the interval: %v, want ErrUnknownKey until the next read", err)
	}
	clock.advance(KeyReloadInterval)
	if _, err := e.VerifyToken(ctx, fresh); err != nil {
		t.Fatalf("token of a key added to the file, after the interval: %v", err)
	}
	if _, err := e.VerifyToken(ctx, good); err != nil {
		t.Fatalf("token of the first key: %v", err)
	}
}

// LoadWakeKeys creates a missing key file (mode 0600, one generated key)
// and registers the key's id and fingerprint — never its secret — in the
// store; a later engine on the same file signs with the same key.
func TestLoadWakeKeysCreatesKeyFile(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "starflow.db.wakekeys")
	st := &keyStore{}
	e, err := New(Config{Store: st, WakeKeyFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWakeKeys(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	keys, err := waketoken.ReadKeyFile(file, nil)
	if err != nil || len(keys) != 1 {
		t.Fatalf("key file holds %v, %v", keys, err)
	}
	reg, _ := st.WakeKeys(ctx)
	if len(reg) != 1 || reg[0].ID != keys[0].ID || reg[0].Fingerprint != waketoken.Fingerprint(keys[0]) {
		t.Fatalf("registered %+v, want the key's id and fingerprint", reg)
	}
	e2, err := New(Config{Store: st, WakeKeyFile: file})
	if err != nil {
		t.Fatal(err)
	}
	tok := waketoken.Sign(keys[0], "r", "w", time.Now().Add(time.Hour))
	if _, err := e2.VerifyToken(ctx, tok); err != nil {
		t.Fatalf("a second engine on the file: %v", err)
	}
}

// Verifying never creates a key file: without one, every token is
// unknown (401), and the file is still absent.
func TestVerifyTokenWithoutKeyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "starflow.db.wakekeys")
	e, err := New(Config{Store: &keyStore{}, WakeKeyFile: file})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := waketoken.Generate("k1")
	if _, err := e.VerifyToken(context.Background(), waketoken.Sign(k, "r", "w", time.Now().Add(time.Hour))); !errors.Is(err, starflowtype.ErrTokenInvalid) {
		t.Fatalf("VerifyToken without a key file: %v, want ErrTokenInvalid", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("verifying created the key file: %v", err)
	}
}

// A process whose key has another secret than the key of the same id
// another process registered fails at start with ErrWakeKeyMismatch.
func TestLoadWakeKeysMismatch(t *testing.T) {
	ctx := context.Background()
	mine, _ := waketoken.Generate("k1")
	theirs, _ := waketoken.Generate("k1")
	st := &keyStore{}
	if _, err := st.AddWakeKey(ctx, state.WakeKey{ID: "k1", Fingerprint: waketoken.Fingerprint(theirs)}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Store: st, WakeKeys: []waketoken.Key{mine}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWakeKeys(ctx); !errors.Is(err, starflowtype.ErrWakeKeyMismatch) {
		t.Fatalf("LoadWakeKeys with another secret under k1: %v, want ErrWakeKeyMismatch", err)
	}
	same, err := New(Config{Store: st, WakeKeys: []waketoken.Key{theirs}})
	if err != nil {
		t.Fatal(err)
	}
	if err := same.LoadWakeKeys(ctx); err != nil {
		t.Fatalf("LoadWakeKeys with the registered key: %v", err)
	}
}

// Without keys, a key file or an ephemeral key (a PostgreSQL store with
// nothing configured), the ring is ErrNoWakeKeys; an ephemeral key signs
// and verifies in its process.
func TestNoWakeKeys(t *testing.T) {
	ctx := context.Background()
	e, err := New(Config{Store: &keyStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWakeKeys(ctx); !errors.Is(err, starflowtype.ErrNoWakeKeys) {
		t.Fatalf("LoadWakeKeys: %v, want ErrNoWakeKeys", err)
	}
	if _, err := e.VerifyToken(ctx, "v1.x.y"); !errors.Is(err, starflowtype.ErrNoWakeKeys) {
		t.Fatalf("VerifyToken: %v, want ErrNoWakeKeys", err)
	}
	eph, err := New(Config{Store: &keyStore{}, EphemeralWakeKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := eph.LoadWakeKeys(ctx); err != nil {
		t.Fatal(err)
	}
	keys, _ := eph.wakeKeys(ctx, false, false)
	if _, err := eph.VerifyToken(ctx, waketoken.Sign(keys[0], "r", "w", time.Now().Add(time.Hour))); err != nil {
		t.Fatalf("ephemeral key: %v", err)
	}
}
