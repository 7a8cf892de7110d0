package engine

import (
	"context"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
)

// SigningKey is the key the ring signs with now (its first), the key
// file created with one generated key when it does not exist yet, as for
// the first wait. Webhook secrets derive from it (internal/webhook).
// Errors as LoadWakeKeys.
func (e *Engine) SigningKey(ctx context.Context) (waketoken.Key, error) {
	keys, err := e.wakeKeys(ctx, false, true)
	if err != nil {
		return waketoken.Key{}, err
	}
	if len(keys) == 0 {
		return waketoken.Key{}, starflowtype.ErrNoWakeKeys
	}
	return keys[0], nil
}

// KeyByID is the ring's key of id (reading the key file again once,
// within the limit of KeyReloadInterval, when the ring does not hold it):
// the key a stored webhook's secret derives from. An error when no key
// of the ring has that id (rotated out).
func (e *Engine) KeyByID(ctx context.Context, id string) (waketoken.Key, error) {
	return e.keyByID(ctx, id)
}
