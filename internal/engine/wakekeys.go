package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/state"
)

// GeneratedKeyID is the id of the wake key an engine generates and stores
// when neither the configuration nor the store holds one. Every process
// that finds the store empty generates a key under this id and
// AddWakeKey keeps the first stored, so all of them agree on it.
const GeneratedKeyID = "generated-1"

// KeyReloadInterval is the shortest time between two reloads of the
// stored wake keys asked for by a token (or a stored wait) naming a key
// the ring does not hold. A token of an unknown key is unauthenticated
// input: without the limit every such request would cost a store read
// before its MAC is even checked. A key another process added is seen
// within this interval.
const KeyReloadInterval = 10 * time.Second

// keyRing holds the wake-token keys: the configured ones (fixed), or
// those of the store, loaded on first use and reloaded when a token names
// a key not seen yet (another process may have added it), at most once
// per KeyReloadInterval.
type keyRing struct {
	mu     sync.Mutex
	keys   []waketoken.Key
	fixed  bool
	loaded time.Time // when keys were last read from the store (Config.Now)
}

// wakeKeys returns the key ring, the signing key first. reload asks for
// the stored keys to be read again; it is granted at most once per
// KeyReloadInterval (else the ring as held is returned).
func (e *Engine) wakeKeys(ctx context.Context, reload bool) ([]waketoken.Key, error) {
	r := &e.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fixed || (len(r.keys) > 0 && !reload) {
		return r.keys, nil
	}
	now := e.cfg.Now()
	if len(r.keys) > 0 && now.Sub(r.loaded) < KeyReloadInterval {
		return r.keys, nil // reloaded recently: an unknown key stays unknown
	}
	stored, err := e.cfg.Store.WakeKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("load wake keys: %w", err)
	}
	if len(stored) == 0 {
		k, err := waketoken.Generate(GeneratedKeyID)
		if err != nil {
			return nil, err
		}
		if _, err := e.cfg.Store.AddWakeKey(ctx, state.WakeKey{ID: k.ID, Secret: k.Secret}); err != nil {
			return nil, fmt.Errorf("store a generated wake key: %w", err)
		}
		if stored, err = e.cfg.Store.WakeKeys(ctx); err != nil {
			return nil, fmt.Errorf("load wake keys: %w", err)
		}
		if len(stored) == 0 {
			return nil, errors.New("load wake keys: the store holds none after storing one")
		}
		e.cfg.Logger.Info("generated a wake-token signing key and stored it (set STARFLOW_WAKE_KEYS to manage keys yourself)", "key_id", stored[0].ID)
	}
	keys := make([]waketoken.Key, len(stored))
	for i, k := range stored {
		keys[i] = waketoken.Key{ID: k.ID, Secret: k.Secret}
	}
	r.keys, r.loaded = keys, now
	return keys, nil
}

// VerifyToken checks a wake token's signature and expiry against the key
// ring (reloading the stored keys when the token names an unknown key,
// at most once per KeyReloadInterval). Errors wrap starflowtype.ErrTokenInvalid or ErrWaitClosed.
func (e *Engine) VerifyToken(ctx context.Context, token string) (waketoken.Claims, error) {
	keys, err := e.wakeKeys(ctx, false)
	if err != nil {
		return waketoken.Claims{}, err
	}
	c, err := waketoken.Verify(keys, token, e.cfg.Now())
	if errors.Is(err, waketoken.ErrUnknownKey) && !e.ring.fixed {
		if keys, rerr := e.wakeKeys(ctx, true); rerr == nil {
			c, err = waketoken.Verify(keys, token, e.cfg.Now())
		}
	}
	return c, err
}

// keyByID finds a key of the ring (reloading once, within the limit of
// KeyReloadInterval).
func (e *Engine) keyByID(ctx context.Context, id string) (waketoken.Key, error) {
	for reload := range 2 {
		keys, err := e.wakeKeys(ctx, reload == 1)
		if err != nil {
			return waketoken.Key{}, err
		}
		for _, k := range keys {
			if k.ID == id {
				return k, nil
			}
		}
		if e.ring.fixed {
			break
		}
	}
	return waketoken.Key{}, fmt.Errorf("wake key %q is not in the key ring (rotated out?)", id)
}
