// Package jsonvalue encodes and decodes the JSON-like values Starflow
// keeps in a run's context (nil, bool, int64, float64, string, []any,
// map[string]any) so that a value survives a round trip through a
// checkpoint with its CEL type intact: JSON numbers without a fraction or
// exponent decode as int64, others as float64 (SPEC §2), and a float64 with
// an integral value encodes with a ".0" so it decodes as a float again.
// Without that, a resumed run could see 980 (int) where an uninterrupted
// one saw 980.0 (double), and CEL arithmetic mixing it with a double would
// fail only after a resume.
//
// A number with no finite float64 value (1e400, -1e400, an integer of 400
// digits) is an error, never ±Inf: a payload carrying one is refused before
// anything is stored or consumed.
//
// Import rule: standard library only.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ErrNonFinite is matched (errors.Is) by the *RangeError that Decode and
// Validate return for a number with no finite float64 value.
var ErrNonFinite = errors.New("number out of range")

// RangeError is a JSON number that has no finite float64 value: its
// magnitude is above math.MaxFloat64 (about 1.8e308), like 1e400 or an
// integer of 400 digits, so decoding it would give ±Inf. (A number too
// small to represent, like 1e-400, is 0, as in every JSON decoder.)
type RangeError struct {
	// Number is the literal as written (its first 32 bytes, then "…").
	Number string
	// Path locates the number: "$" is the whole value, then ".key" or
	// ["key"] for object members and [i] for array elements (from 0).
	Path string
	// Offset is the number's byte offset in the input (from 0); Line and
	// Column (both from 1, the column counted in characters) say the same.
	Offset       int64
	Line, Column int
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("number %s at %s (line %d, column %d) is out of range: JSON numbers must be finite (at most ±1.8e308); send it as a string to keep its digits",
		e.Number, e.Path, e.Line, e.Column)
}

// Is makes errors.Is(err, ErrNonFinite) true.
func (e *RangeError) Is(target error) bool { return target == ErrNonFinite }

// Decode parses one JSON value with the number rule above. Errors: the
// decoder's syntax errors, trailing data, or a *RangeError (the first
// non-finite number in document order) — no value with ±Inf or NaN is ever
// returned.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, errors.New("no JSON value (the input is empty)")
		}
		return nil, err
	}
	// Only white space may follow (dec.More alone lets a stray ']' or '}'
	// through).
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	v, ok := numbers(v)
	if !ok {
		if err := locate(raw); err != nil {
			return nil, err
		}
		// Not expected: numbers and locate read numbers alike.
		return nil, fmt.Errorf("a number has no finite value: %w", ErrNonFinite)
	}
	return v, nil
}

// Validate reports whether raw is one JSON value whose numbers are all
// finite, with Decode's errors. It is the check for payloads kept as raw
// JSON (a wake payload, a run input) before anything is written.
func Validate(raw []byte) error {
	_, err := Decode(raw)
	return err
}

// numbers converts json.Number values inside v (in place for maps and
// slices) to int64 or float64 and returns the result; ok is false when a
// number has no finite float64 value.
func numbers(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		return number(x)
	case []any:
		for i := range x {
			var ok bool
			if x[i], ok = numbers(x[i]); !ok {
				return nil, false
			}
		}
		return x, true
	case map[string]any:
		for k := range x {
			e, ok := numbers(x[k])
			if !ok {
				return nil, false
			}
			x[k] = e
		}
		return x, true
	}
	return v, true
}

// number converts one JSON number literal: int64 without a fraction or
// exponent when it fits, otherwise float64; ok is false when it is not
// finite.
func number(n json.Number) (any, bool) {
	if !strings.ContainsAny(n.String(), ".eE") {
		if i, err := n.Int64(); err == nil {
			return i, true
		}
	}
	f, _ := n.Float64() // a range error gives ±Inf, checked here
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	return f, true
}

// locate finds the first non-finite number of raw (which decodes) in
// document order, with its path and position; nil when there is none.
func locate(raw []byte) *RangeError {
	type frame struct {
		object  bool
		wantKey bool
		key     string
		index   int
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		b.WriteString("$")
		for _, f := range stack {
			switch {
			case !f.object:
				fmt.Fprintf(&b, "[%d]", f.index)
			case plainKey.MatchString(f.key):
				b.WriteString("." + f.key)
			default:
				k, _ := json.Marshal(f.key)
				fmt.Fprintf(&b, "[%s]", k)
			}
		}
		return b.String()
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object && top.wantKey {
				if k, ok := tok.(string); ok {
					top.key, top.wantKey = k, false
					continue
				}
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, wantKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case json.Number:
			if _, ok := number(t); !ok {
				off := dec.InputOffset() - int64(len(t))
				line, col := position(raw, off)
				lit := string(t)
				if len(lit) > 32 {
					lit = lit[:32] + "…"
				}
				return &RangeError{Number: lit, Path: path(), Offset: off, Line: line, Column: col}
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// plainKey is an object key written as ".key" in a RangeError path.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// position is the line and column (from 1, in characters) of byte offset
// off in raw.
func position(raw []byte, off int64) (line, col int) {
	line, col = 1, 1
	for _, r := range string(raw[:min(int(off), len(raw))]) {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// Encode marshals v, writing every finite float64 (and float32) so that
// Decode reads it back as a float.
func Encode(v any) ([]byte, error) {
	return json.Marshal(floats(v))
}

// floats returns v with float values replaced by json.Number literals that
// keep a fraction or exponent. Values of other types pass through. Lists
// and maps are copied only when they hold a float (copy-on-write): a large
// value without floats is encoded without being duplicated.
func floats(v any) any {
	out, _ := floatsCOW(v)
	return out
}

func floatsCOW(v any) (any, bool) {
	switch x := v.(type) {
	case float64:
		return floatNumber(x), true
	case float32:
		return floatNumber(float64(x)), true
	case []any:
		var cp []any
		for i, e := range x {
			ne, ch := floatsCOW(e)
			if ch && cp == nil {
				cp = make([]any, len(x))
				copy(cp, x[:i])
			}
			if cp != nil {
				cp[i] = ne
			}
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	case map[string]any:
		var cp map[string]any
		for k, e := range x {
			ne, ch := floatsCOW(e)
			if ch && cp == nil {
				cp = make(map[string]any, len(x))
				for k2, e2 := range x {
					cp[k2] = e2
				}
			}
			if cp != nil {
				cp[k] = ne
			}
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	}
	return v, false
}

func floatNumber(f float64) any {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f // json.Marshal reports the error
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.Number(s)
}
