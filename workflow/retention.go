package workflow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention is a definition's override of how long the store keeps the
// ended runs of the workflow (issue 16): `retention: {succeeded: 1d,
// failed: 7d}`. A field left out keeps the store's age (`starflow gc
// --retain-succeeded`, `--retain-failed`). It applies to the runs of the
// workflow's name in its workspace as long as it is in the current
// revision. Runs held for an operator (interrupted in recovery mode
// manual, dead-lettered) keep the store's --retain-held age.
type Retention struct {
	// Succeeded: how long a succeeded run stays after it ended.
	Succeeded Duration `json:"succeeded,omitempty"`
	// Failed: how long a failed (not dead-lettered) or cancelled run
	// stays after it ended.
	Failed Duration `json:"failed,omitempty"`
}

var retentionFields = []string{"succeeded", "failed"}

// ParseAge parses a retention age: a Go duration ("90m", "36h",
// "1h30m") or whole days, optionally followed by a Go duration ("7d",
// "1d12h"), at most AgeMax (36500d). It refuses a negative age and says
// how to write one, and one over AgeMax as too large
// (ErrDurationTooLarge), naming the bound.
func ParseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid age %q: write it like 7d, 1d12h, 36h or 90m", s)
	big := tooLargeError(fmt.Sprintf("age %q is too large: at most %dd (100 years)", s, AgeMax/(24*time.Hour)))
	rest := strings.TrimSpace(s)
	var d time.Duration
	if i := strings.IndexByte(rest, 'd'); i >= 0 {
		days, err := strconv.ParseUint(rest[:i], 10, 64)
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange), err == nil && days > uint64(AgeMax/(24*time.Hour)):
			return 0, big
		case err != nil:
			return 0, bad
		}
		d, rest = time.Duration(days)*24*time.Hour, rest[i+1:]
		if rest == "" {
			return d, nil
		}
	}
	if rest == "" || rest[0] == '-' || rest[0] == '+' {
		return 0, bad
	}
	g, err := ParseDuration(rest)
	switch {
	case tooLarge(err):
		return 0, big
	case err != nil:
		return 0, bad
	case g > AgeMax-d:
		return 0, big
	}
	return d + g, nil
}

func (d *decoder) retention(n *vnode) *Retention {
	r := &Retention{}
	if !d.fields(n, "retention", retentionFields, func(p vpair) {
		field := "retention." + p.key
		if p.val.kind != vString {
			d.typeError(p.val, field, `an age like "7d" or "36h"`)
			return
		}
		v, err := ParseAge(p.val.s)
		switch {
		case err != nil:
			d.errorf(p.val.pos, "%s: %v", field, err)
			return
		case v < time.Minute:
			d.errorf(p.val.pos, "%s must be at least 1m, not %s", field, p.val.s)
			return
		}
		if p.key == "succeeded" {
			r.Succeeded = Duration(v)
		} else {
			r.Failed = Duration(v)
		}
	}) {
		return nil
	}
	if len(n.pairs) == 0 {
		d.errorf(n.pos, "retention must set succeeded or failed (or be left out)")
		return nil
	}
	return r
}
