package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/state"
)

// GeneratedKeyID is the id of the wake key an engine generates and stores
// when neither the configuration nor the store holds one. Every process
// that finds the store empty generates a key under this id and
// AddWakeKey keeps the first stored, so all of them agree on it.
const GeneratedKeyID = "generated-1"

// keyRing holds the wake-token keys: the configured ones (fixed), or
// those of the store, loaded on first use and reloaded when a token names
// a key not seen yet (another process may have added it).
type keyRing struct {
	mu    sync.Mutex
	keys  []waketoken.Key
	fixed bool
}

// wakeKeys returns the key ring, the signing key first.
func (e *Engine) wakeKeys(ctx context.Context, reload bool) ([]waketoken.Key, error) {
	r := &e.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fixed || (len(r.keys) > 0 && !reload) {
		return r.keys, nil
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
	r.keys = keys
	return keys, nil
}

// VerifyToken checks a wake token's signature and expiry against the key
// ring (reloading the stored keys once when the token names an unknown
// key). Errors wrap starflowtype.ErrTokenInvalid or ErrWaitClosed.
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

// keyByID finds a key of the ring (reloading once).
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
