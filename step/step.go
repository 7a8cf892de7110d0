// Package step is the contract between the engine and step handlers: the
// built-in kinds and custom step types registered from Go
// (starflow.Engine.RegisterStep).
//
// Import rule: standard library and starflowtype only.
package step

import (
	"context"
	"errors"
	"log/slog"

	"github.com/starflow/starflow/starflowtype"
)

// Func executes one try of a step. It returns the step's output (any value
// that encodes as JSON) or an error. Errors are retried under the step's
// retry_policy unless wrapped with Permanent. The context is cancelled when
// the step's timeout passes, when the run's lease is lost, or when the
// runner stops; a handler must return promptly then.
type Func func(ctx context.Context, req *Request) (any, error)

// Request is what a handler knows about the step instance it executes.
type Request struct {
	RunID     string
	Workflow  string
	StepID    string
	ScopePath string // '' at the root; see SPEC §1
	Attempt   int    // the run's attempt (1, 2, …)
	Try       int    // this step instance's try within the attempt (1, 2, …)
	// Input is the step's rendered input: the value written under the step
	// type's key, with every `${{ }}` evaluated.
	Input any
	// IdempotencyKey is "<run_id>/<scope_path>/<step_id>": stable across
	// tries, attempts and resumes. Send it to services with side effects.
	IdempotencyKey string
	// FencingToken is "<run_id>/<lease_epoch>": a service that remembers
	// the highest epoch it has seen per idempotency key can refuse writes
	// from a superseded runner.
	FencingToken string
	// Lease is the runner's lease on the run.
	Lease starflowtype.Lease
	// Logger is scoped to the run and step.
	Logger *slog.Logger
	// Progress reports progress (fraction 0..1, message) to live views. It
	// never reaches the cold store. Safe to call from any goroutine; never
	// nil.
	Progress func(fraction float64, message string)
}

// permanent marks an error that must not be retried.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that neither the step's retry_policy nor the
// run-level retry tries again: the run fails at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err (or an error it wraps) was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Error is a typed failure a handler returns (errors.As finds it through
// wrapping): the step fails with error type Type (any name; the built-in
// types are listed in starflowtype, e.g. "http", "timeout"), message
// Message and Details (any value that encodes as JSON) — what a catch sees
// as error.type, error.message and error.details, and what retry_on and
// catch_when test. Retryable is the default answer of retry_on (when the
// step's retry_policy sets none): true retries the try, false fails the
// step at once. An Error wrapped with Permanent is never retried.
//
// Source: the typed application errors of Temporal (ApplicationError's
// type, details and non-retryable flag).
type Error struct {
	Type      string
	Message   string
	Details   any
	Retryable bool
}

// Error returns the message, prefixed with the type.
func (e *Error) Error() string {
	if e.Type == "" {
		return e.Message
	}
	return e.Type + ": " + e.Message
}
