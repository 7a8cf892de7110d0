package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// MarshalJSON writes the definition as JSON: the canonical form when
// marshalled with encoding/json. Two things differ from encoding/json's
// defaults, so that parsing the output gives back an equal definition:
//
//   - a float64 with an integral value in a template is written with a
//     fraction ("1.0", not "1"): it parses back as a double, not an int,
//     and CEL sees the same type;
//   - characters YAML does not accept in a document, or reads as a line
//     break (DEL, C1 controls, U+FEFF, U+FFFE, U+FFFF) are written as \u
//     escapes.
func (d Definition) MarshalJSON() ([]byte, error) {
	type plain Definition
	c := plain(d)
	c.Output = canonValue(c.Output)
	c.InputSchema = canonMap(c.InputSchema)
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return yamlSafe(b), nil
}

// MarshalJSON writes the call; template values keep their JSON type (see
// Definition.MarshalJSON).
func (sc ServiceCall) MarshalJSON() ([]byte, error) {
	type plain ServiceCall
	c := plain(sc)
	c.Headers = canonMap(c.Headers)
	c.Query = canonMap(c.Query)
	c.Body = canonValue(c.Body)
	return json.Marshal(c)
}

// canonValue returns v with every integral float64 replaced by a
// json.Number that keeps a fraction.
func canonValue(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			return json.Number(strconv.FormatFloat(x, 'f', -1, 64) + ".0")
		}
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = canonValue(el)
		}
		return out
	case map[string]any:
		return canonMap(x)
	}
	return v
}

func canonMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = canonValue(v)
	}
	return out
}

// yamlSafe escapes, in JSON text, the characters a YAML reader refuses.
// They can only occur inside strings.
func yamlSafe(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		bad := r == 0x7F || (r >= 0x80 && r <= 0x9F) || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF
		if bad && out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		switch {
		case bad:
			out = fmt.Appendf(out, `\u%04x`, r)
		case out != nil:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}
