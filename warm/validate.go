package warm

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid wraps every argument error a store returns (a nil entry, an
// empty id, a fraction outside [0, 1], a non-positive ttl); match it with
// errors.Is. Such errors are the caller's bug: retrying does not help.
var ErrInvalid = errors.New("warm: invalid argument")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ValidateRun checks a RunEntry before a store writes it: non-nil, RunID set.
func ValidateRun(e *RunEntry) error {
	if e == nil {
		return invalid("PutRun: nil run entry")
	}
	if e.RunID == "" {
		return invalid("PutRun: run entry has an empty run_id")
	}
	return nil
}

// ValidateStep checks a StepEntry: non-nil, RunID and StepID set.
func ValidateStep(s *StepEntry) error {
	if s == nil {
		return invalid("PutStep: nil step entry")
	}
	if s.RunID == "" {
		return invalid("PutStep: step entry %q has an empty run_id", s.StepID)
	}
	if s.StepID == "" {
		return invalid("PutStep: step entry of run %s has an empty step_id", s.RunID)
	}
	return nil
}

// ValidateSessionVar checks a session variable's address: Key set.
func ValidateSessionVar(workspace, session, key string) error {
	if key == "" {
		return invalid("PutSessionVar: empty key (workspace %q, session %q)", workspace, session)
	}
	return nil
}

// ValidateProgress checks a Progress: non-nil, RunID and StepID set,
// Fraction a number in [0, 1].
func ValidateProgress(p *Progress) error {
	if p == nil {
		return invalid("PutProgress: nil progress")
	}
	if p.RunID == "" || p.StepID == "" {
		return invalid("PutProgress: progress needs run_id and step_id (got %q, %q)", p.RunID, p.StepID)
	}
	if math.IsNaN(p.Fraction) || p.Fraction < 0 || p.Fraction > 1 {
		return invalid("PutProgress: fraction %v of step %s in run %s is outside [0, 1]", p.Fraction, p.StepID, p.RunID)
	}
	return nil
}

// ValidatePresence checks a Presence: non-nil, RunnerID set, ttl > 0.
func ValidatePresence(p *Presence, ttl time.Duration) error {
	if p == nil {
		return invalid("PutPresence: nil presence")
	}
	if p.RunnerID == "" {
		return invalid("PutPresence: presence has an empty runner_id")
	}
	if ttl <= 0 {
		return invalid("PutPresence: ttl %v of runner %s is not positive", ttl, p.RunnerID)
	}
	return nil
}
