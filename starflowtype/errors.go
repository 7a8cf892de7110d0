package starflowtype

import "errors"

// Sentinel errors. Adapters translate driver errors into these at their
// boundary; callers test them with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist (or is not visible in
	// the caller's workspace).
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: a fenced write matched no workflow_runs row with the
	// writer's (leased_by, lease_epoch); the transaction rolled back and the
	// runner must abandon the run at once, writing nothing more.
	ErrLeaseLost = errors.New("lease lost")
	// ErrConflict: the write contradicts existing state (a duplicate key, a
	// transition the run's current status does not allow).
	ErrConflict = errors.New("conflict")
	// ErrCancelRequested: an operator asked to cancel the run; the runner
	// stops at this step boundary (OnNodeStart wrote nothing) and records
	// the cancellation with OnRunCancelled.
	ErrCancelRequested = errors.New("cancel requested")
	// ErrNoCheckpoint: a resume in resume mode found no checkpoint.
	ErrNoCheckpoint = errors.New("no_checkpoint")
	// ErrRevisionMismatch: a resume onto another revision is not possible.
	ErrRevisionMismatch = errors.New("revision_mismatch")
)

// ErrInvalid: the caller's request is wrong (an input that is not an
// object or breaks the input_schema, an unknown recovery mode, a
// malformed duration): nothing was written. Errors wrapping it say what
// is wrong; the HTTP API answers them 400 (422 for a definition).
var ErrInvalid = errors.New("invalid request")

// Invalid marks err as the caller's mistake: errors.Is(Invalid(err),
// ErrInvalid) holds, and its text stays err's. Invalid(nil) is nil.
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return invalidError{err}
}

type invalidError struct{ err error }

func (e invalidError) Error() string        { return e.err.Error() }
func (e invalidError) Unwrap() error        { return e.err }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// NotFound marks err as ErrNotFound for a sentence that already says what
// is missing: errors.Is(NotFound(err), ErrNotFound) holds, and its text
// stays err's (no ": not found" after it). NotFound(nil) is nil.
func NotFound(err error) error {
	if err == nil {
		return nil
	}
	return notFoundError{err}
}

type notFoundError struct{ err error }

func (e notFoundError) Error() string        { return e.err.Error() }
func (e notFoundError) Unwrap() error        { return e.err }
func (e notFoundError) Is(target error) bool { return target == ErrNotFound }
