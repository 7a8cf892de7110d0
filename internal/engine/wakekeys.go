package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// KeyReloadInterval is the shortest time between two reads of the wake-key
// file asked for by a token (or a stored wait) naming a key the ring does
// not hold. A token of an unknown key is unauthenticated input: without
// the limit every such request would cost a file read before its MAC is
// even checked. A key added to the file (by an operator rotating keys, or
// by a restarted process generating the first one) is seen within this
// interval.
const KeyReloadInterval = 10 * time.Second

// keyRing holds the wake-token keys: fixed (configured, or one ephemeral
// key), or those of a key file, read at first use and read again when a
// token names a key not seen yet (at most once per KeyReloadInterval).
// Every key is registered in the store (id and fingerprint) once.
type keyRing struct {
	mu         sync.Mutex
	keys       []waketoken.Key
	fixed      bool
	file       string
	loaded     bool
	loadedAt   time.Time       // when the file was last read (Config.Now)
	registered map[string]bool // key ids registered in the store
}

// wakeKeys returns the key ring, the signing key first. reload asks for
// the key file to be read again, granted at most once per
// KeyReloadInterval. create asks for a key to exist: a missing key file is
// then created with one generated key; without create a missing file is
// an empty ring. Errors: starflowtype.ErrNoWakeKeys, starflowtype.ErrWakeKeyMismatch, an unreadable
// or refused key file, a store error while registering.
func (e *Engine) wakeKeys(ctx context.Context, reload, create bool) ([]waketoken.Key, error) {
	r := &e.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.fixed:
	case r.file == "":
		return nil, starflowtype.ErrNoWakeKeys
	default:
		now := e.cfg.Now()
		fresh := r.loaded && (!reload || now.Sub(r.loadedAt) < KeyReloadInterval)
		if fresh && (len(r.keys) > 0 || !create) {
			break
		}
		var keys []waketoken.Key
		var err error
		if create {
			var made bool
			keys, made, err = waketoken.LoadOrCreateKeyFile(r.file, e.cfg.Logger)
			if made {
				e.cfg.Logger.Info("generated a wake-token signing key in the key file (mode 0600); set STARFLOW_WAKE_KEYS to manage keys yourself",
					"file", r.file, "key_id", keys[0].ID)
			}
		} else {
			keys, err = waketoken.ReadKeyFile(r.file, e.cfg.Logger)
			if errors.Is(err, fs.ErrNotExist) {
				keys, err = nil, nil // no key yet: no token can verify
			}
		}
		if err != nil {
			return nil, fmt.Errorf("load wake keys: %w", err)
		}
		r.keys, r.loaded, r.loadedAt = keys, true, now
	}
	if err := e.registerKeys(ctx, r); err != nil {
		return nil, err
	}
	return r.keys, nil
}

// registerKeys registers in the store the id and fingerprint of every key
// of the ring not registered yet (r.mu held), and checks that the store's
// fingerprint of each id is this key's: another process signing with
// another secret under the same id is starflowtype.ErrWakeKeyMismatch.
func (e *Engine) registerKeys(ctx context.Context, r *keyRing) error {
	for _, k := range r.keys {
		if r.registered[k.ID] {
			continue
		}
		fp := waketoken.Fingerprint(k)
		got, err := e.cfg.Store.AddWakeKey(ctx, state.WakeKey{ID: k.ID, Fingerprint: fp})
		switch {
		case errors.Is(err, state.ErrNotImplemented):
		case err != nil:
			return fmt.Errorf("register wake key %s: %w", k.ID, err)
		case got.Fingerprint != fp:
			return fmt.Errorf("wake key %q: the store holds fingerprint %.12s… for this id and this process's key has %.12s…: "+
				"every process must use the same keys (STARFLOW_WAKE_KEYS or the key file), and a new key needs a new id: %w",
				k.ID, got.Fingerprint, fp, starflowtype.ErrWakeKeyMismatch)
		}
		if r.registered == nil {
			r.registered = map[string]bool{}
		}
		r.registered[k.ID] = true
	}
	return nil
}

// LoadWakeKeys makes sure the engine can sign wake tokens: the ring is
// loaded (a missing key file created with one generated key) and
// registered in the store. A process that runs steps or maintenance calls
// it at start, so a missing or mismatched key is an error at once rather
// than at the first wait. Errors as wakeKeys.
func (e *Engine) LoadWakeKeys(ctx context.Context) error {
	_, err := e.wakeKeys(ctx, false, true)
	return err
}

// VerifyToken checks a wake token's signature and expiry against the key
// ring (reading the key file again when the token names an unknown key,
// at most once per KeyReloadInterval). Errors wrap
// starflowtype.ErrTokenInvalid or ErrWaitClosed, or starflowtype.ErrNoWakeKeys.
func (e *Engine) VerifyToken(ctx context.Context, token string) (waketoken.Claims, error) {
	keys, err := e.wakeKeys(ctx, false, false)
	if err != nil {
		return waketoken.Claims{}, err
	}
	c, err := waketoken.Verify(keys, token, e.cfg.Now())
	if errors.Is(err, waketoken.ErrUnknownKey) && !e.ring.fixed {
		if keys, rerr := e.wakeKeys(ctx, true, false); rerr == nil {
			c, err = waketoken.Verify(keys, token, e.cfg.Now())
		}
	}
	return c, err
}

// keyByID finds a key of the ring (reading the key file again once,
// within the limit of KeyReloadInterval).
func (e *Engine) keyByID(ctx context.Context, id string) (waketoken.Key, error) {
	for reload := range 2 {
		keys, err := e.wakeKeys(ctx, reload == 1, false)
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
