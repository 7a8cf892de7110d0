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
// Import rule: standard library only.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Decode parses one JSON value with the number rule above.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return Numbers(v), nil
}

// Numbers converts json.Number values inside v (in place for maps and
// slices) to int64 or float64 and returns the result.
func Numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = Numbers(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = Numbers(x[k])
		}
		return x
	}
	return v
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
