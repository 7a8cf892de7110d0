package workflow

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"time"
)

// DurationMax is the largest duration ParseDuration takes: the largest
// time.Duration, 2562047h47m16.854775807s (about 292 years).
const DurationMax = time.Duration(math.MaxInt64)

// AgeMax is the largest retention age ParseAge takes: 36500d (100 years).
const AgeMax = 36500 * 24 * time.Hour

// ErrDurationTooLarge is matched (errors.Is) by the errors of ParseDuration
// and ParseAge for a value written correctly but over its bound.
var ErrDurationTooLarge = errors.New("duration too large")

// goDuration is the syntax time.ParseDuration accepts: an optional sign,
// then decimal numbers each with a unit, or "0".
var goDuration = regexp.MustCompile(`^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$`)

// ParseDuration parses a Go duration ("500ms", "30s", "1h30m") as
// time.ParseDuration does, with errors worded for people: one written
// correctly but beyond DurationMax says it is too large and names the
// bound (ErrDurationTooLarge); anything else says how to write one. The
// errors name neither the value nor the field: the caller does.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if goDuration.MatchString(strings.TrimSpace(s)) {
		return 0, tooLargeError("too large: at most 2562047h (about 292 years)")
	}
	return 0, errors.New("not a duration: write it like 500ms, 30s, 5m or 1h30m")
}

// tooLargeError is a refusal of a value over its bound: its text, and
// errors.Is(err, ErrDurationTooLarge).
type tooLargeError string

func (e tooLargeError) Error() string        { return string(e) }
func (e tooLargeError) Is(target error) bool { return target == ErrDurationTooLarge }

// tooLarge reports whether err is ParseDuration's refusal of a value
// beyond DurationMax.
func tooLarge(err error) bool { return errors.Is(err, ErrDurationTooLarge) }
