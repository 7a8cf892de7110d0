package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestRoundTripKeepsTypes(t *testing.T) {
	in := map[string]any{"f": 980.0, "g": 2.5, "i": int64(980), "big": 1e21, "small": 1e-7, "l": []any{3.0, int64(3)}, "s": "x", "n": nil, "b": true}
	raw, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed values:\n in %#v\nout %#v\njson %s", in, out, raw)
	}
	for _, in := range []string{`1 2`, `1}`, `{"a":1}]`, `"x" ,`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Fatalf("trailing data accepted: %s", in)
		}
	}
}

func TestDecodeRefusesNonFinite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, number, path string
		line, col              int
	}{
		{"root", `1e400`, "1e400", "$", 1, 1},
		{"negative", `-1e400`, "-1e400", "$", 1, 1},
		{"member", `{"amount": 1E+309}`, "1E+309", "$.amount", 1, 12},
		{"array", `[1, 2.5, -1.8e308]`, "-1.8e308", "$[2]", 1, 10},
		{"digits", `{"n": 1` + strings.Repeat("0", 400) + `}`, "1" + strings.Repeat("0", 31) + "…", "$.n", 1, 7},
		{"nested", "{\n  \"a\": [{\"b\": 1}, {\"we ird\": [0, 1e999]}]\n}", "1e999", `$.a[1]["we ird"][1]`, 2, 34},
		{"first in document order", `{"z": 1e400, "a": 2e400}`, "1e400", "$.z", 1, 7},
		{"after objects and arrays", `[{"a": [1, {}], "b": []}, [[]], 5e500]`, "5e500", "$[2]", 1, 33},
		{"after non-ascii", `{"é": "ü", "x": 1e400}`, "1e400", "$.x", 1, 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for name, fn := range map[string]func([]byte) error{
				"Decode":   func(b []byte) error { _, err := Decode(b); return err },
				"Validate": Validate,
			} {
				err := fn([]byte(tc.in))
				var re *RangeError
				if !errors.As(err, &re) || !errors.Is(err, ErrNonFinite) {
					t.Fatalf("%s(%.60s) = %v, want a *RangeError", name, tc.in, err)
				}
				if re.Number != tc.number || re.Path != tc.path || re.Line != tc.line || re.Column != tc.col {
					t.Errorf("%s: got %+v, want number %s at %s line %d column %d", name, *re, tc.number, tc.path, tc.line, tc.col)
				}
				if !strings.HasPrefix(tc.in[re.Offset:], strings.TrimSuffix(re.Number, "…")) {
					t.Errorf("%s: offset %d does not point at the number in %q", name, re.Offset, tc.in)
				}
				msg := err.Error()
				for _, frag := range []string{tc.number, tc.path, "out of range", "finite"} {
					if !strings.Contains(msg, frag) {
						t.Errorf("%s: error %q lacks %q", name, msg, frag)
					}
				}
			}
		})
	}
}

func TestDecodeFiniteEdges(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]any{
		`1.7976931348623157e308`:  math.MaxFloat64,
		`-1.7976931348623157e308`: -math.MaxFloat64,
		`1e-400`:                  0.0, // underflow is 0, as in every JSON decoder
		`99999999999999999999`:    1e20,
		`-9223372036854775808`:    int64(math.MinInt64),
	} {
		got, err := Decode([]byte(in))
		if err != nil || got != want {
			t.Errorf("Decode(%s) = %#v, %v; want %#v", in, got, err, want)
		}
		if err := Validate([]byte(in)); err != nil {
			t.Errorf("Validate(%s) = %v", in, err)
		}
	}
	for _, in := range []string{``, `{`, `1 2`, `NaN`, `Infinity`, `-Infinity`, `[1,]`} {
		if err := Validate([]byte(in)); err == nil || errors.Is(err, ErrNonFinite) {
			t.Errorf("Validate(%q) = %v, want a syntax error", in, err)
		}
	}
}

// FuzzDecode: Decode never panics and never returns a non-finite number;
// what it accepts survives Encode with its types; Validate agrees with it;
// and valid JSON it refuses is refused only for a non-finite number whose
// literal is at the reported offset.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2.5, "x", null, true, {"b": -0.0}]}`, `1e400`, `-1e400`, `[1e308, 1e309]`,
		`{"n": 1` + strings.Repeat("0", 400) + `}`, `1e-400`, `"\u00e9"`, `[[[[]]]]`, `{"a":1,"a":2}`,
		`9223372036854775808`, `NaN`, `{"x": Infinity}`, ` 1 `, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := Decode(raw)
		if verr := Validate(raw); (verr == nil) != (err == nil) {
			t.Fatalf("Validate = %v but Decode = %v", verr, err)
		}
		if err != nil {
			var re *RangeError
			if errors.As(err, &re) {
				if !json.Valid(raw) {
					t.Fatalf("a RangeError for invalid JSON %q", raw)
				}
				lit := strings.TrimSuffix(re.Number, "…")
				if re.Offset < 0 || int(re.Offset) > len(raw) || !bytes.HasPrefix(raw[re.Offset:], []byte(lit)) {
					t.Fatalf("RangeError %+v does not point at its number in %q", *re, raw)
				}
				if f, _ := strconv.ParseFloat(string(raw[re.Offset:re.Offset+int64(len(lit))]), 64); len(re.Number) <= 32 && !math.IsInf(f, 0) {
					t.Fatalf("RangeError for the finite number %s", re.Number)
				}
			} else if json.Valid(raw) {
				t.Fatalf("valid JSON %q refused: %v", raw, err)
			}
			return
		}
		if bad := nonFinite(v); bad != "" {
			t.Fatalf("Decode(%q) returned a non-finite number at %s", raw, bad)
		}
		enc, err := Encode(v)
		if err != nil {
			t.Fatalf("Encode of a decoded value: %v", err)
		}
		back, err := Decode(enc)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("round trip changed %q: %#v -> %s -> %#v (%v)", raw, v, enc, back, err)
		}
	})
}

// nonFinite is the path of a ±Inf or NaN inside v ("" when none).
func nonFinite(v any) string {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "$"
		}
	case []any:
		for i, e := range x {
			if p := nonFinite(e); p != "" {
				return fmt.Sprintf("[%d]%s", i, p)
			}
		}
	case map[string]any:
		for k, e := range x {
			if p := nonFinite(e); p != "" {
				return "." + k + p
			}
		}
	}
	return ""
}

// TestEncodeDoesNotCopyWithoutFloats: floats copies a list or map only
// when a float inside it must be rewritten, and never changes its
// argument.
func TestEncodeDoesNotCopyWithoutFloats(t *testing.T) {
	t.Parallel()
	clean := []any{map[string]any{"a": int64(1)}, "x"}
	if out := floats(clean); &out.([]any)[0] != &clean[0] {
		t.Fatal("a value without floats was copied")
	}
	in := map[string]any{"f": 2.0, "n": []any{int64(1)}}
	b, err := Encode(in)
	if err != nil || string(b) != `{"f":2.0,"n":[1]}` {
		t.Fatalf("%s %v", b, err)
	}
	if _, ok := in["f"].(float64); !ok {
		t.Fatal("the argument was changed")
	}
}
