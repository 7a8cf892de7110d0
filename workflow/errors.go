package workflow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a definition, at a position of its source.
type Error struct {
	File string // as given to Parse; "<input>" when that was empty
	// Line and Column are 1-based; Column counts characters, not bytes.
	// Column is 0 when the position is known to the line only (YAML syntax
	// errors), Line is 0 when it is not known at all.
	Line, Column int
	Msg          string
	// Err is the underlying cause when there is one (an *expr.SyntaxError
	// for an expression that does not compile), for errors.Is / errors.As.
	Err error
}

// Error formats e as "file:line:col: message".
func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return e.File + ": " + e.Msg
	case e.Column == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem Parse found in a definition, sorted by position.
// Parse returns it as *Errors; errors.As works with a target of type
// *Errors, Errors or *Error (the first problem).
type Errors []*Error

// Error formats one problem per line.
func (e Errors) Error() string {
	var b strings.Builder
	for i, x := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(x.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is and errors.As see each one.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, x := range e {
		out[i] = x
	}
	return out
}

// As lets errors.As fill a target of type *Errors with the list.
func (e Errors) As(target any) bool {
	if t, ok := target.(*Errors); ok {
		*t = e
		return true
	}
	return false
}

// errorList collects problems while parsing.
type errorList struct {
	file string
	orig func(Pos) Pos // maps a parser position to the original text
	list Errors
}

func (l *errorList) add(p Pos, err error, format string, args ...any) {
	if l.orig != nil && p.Line > 0 {
		p = l.orig(p)
	}
	l.list = append(l.list, &Error{File: l.file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...), Err: err})
}

// result sorts the problems by position, drops exact repeats (content
// shared through a YAML alias is checked once per use) and returns them as
// an error, or nil when there are none.
func (l *errorList) result() error {
	if len(l.list) == 0 {
		return nil
	}
	slices.SortStableFunc(l.list, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Msg, b.Msg))
	})
	out := l.list[:1]
	for _, e := range l.list[1:] {
		last := out[len(out)-1]
		if e.Line == last.Line && e.Column == last.Column && e.Msg == last.Msg {
			continue
		}
		out = append(out, e)
	}
	errs := out
	return &errs
}
