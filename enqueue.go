package starflow

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/starflow/starflow/starflowtype"
)

// The bounds of EnqueueOptions. Enqueue and EnqueueParams refuse an option
// outside them (EnqueueOptions.Validate, ErrInvalid); the HTTP API's
// schema (api.EnqueueRequest and the Idempotency-Key header) states the
// same numbers, and the CLI checks them before it enqueues on a store or
// through a server, so every path refuses the same requests in the same
// words.
const (
	// PriorityMax bounds Priority: from -PriorityMax to PriorityMax.
	PriorityMax = 1_000_000
	// IdempotencyKeyMax is the longest IdempotencyKey, in characters.
	IdempotencyKeyMax = 255
	// PoolNameMax is the longest Pool, in characters.
	PoolNameMax = 200
	// MaxAttemptsMax bounds MaxAttempts (0: the definition's).
	MaxAttemptsMax = 1000
)

// Validate reports the first option outside its bound (ErrInvalid),
// naming the option, the value and the bound; nil options are valid.
func (o *EnqueueOptions) Validate() error {
	if o == nil {
		return nil
	}
	var err error
	switch {
	case o.Priority < -PriorityMax || o.Priority > PriorityMax:
		err = fmt.Errorf("priority %d is out of range: it must be between %d and %d (higher is claimed first)", o.Priority, -PriorityMax, PriorityMax)
	case utf8.RuneCountInString(o.IdempotencyKey) > IdempotencyKeyMax:
		err = fmt.Errorf("the idempotency key is %d characters long: at most %d are taken", utf8.RuneCountInString(o.IdempotencyKey), IdempotencyKeyMax)
	case utf8.RuneCountInString(o.Pool) > PoolNameMax:
		err = fmt.Errorf("the pool name is %d characters long: at most %d are taken", utf8.RuneCountInString(o.Pool), PoolNameMax)
	case o.MaxAttempts < 0 || o.MaxAttempts > MaxAttemptsMax:
		err = fmt.Errorf("max attempts %d is out of range: it must be between 1 and %d (0: the definition's)", o.MaxAttempts, MaxAttemptsMax)
	case o.Delay < 0:
		err = fmt.Errorf("delay %s is negative: it must be 0s or more (0s makes the run available at once)", o.Delay)
	case !utf8.ValidString(o.IdempotencyKey):
		err = errors.New("the idempotency key is not valid UTF-8")
	}
	return starflowtype.Invalid(err)
}
