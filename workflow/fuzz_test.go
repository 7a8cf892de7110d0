package workflow

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: Parse never panics, and what it accepts survives its
// canonical form: Parse(Canonical()) succeeds with the same revision and
// an equal definition.
func FuzzParse(f *testing.F) {
	for _, src := range validDefs {
		f.Add([]byte(src))
	}
	for _, c := range invalidCases {
		if c.src != laughs {
			f.Add([]byte(c.src))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("f.yaml", data, testOpts)
		if err != nil {
			if d != nil {
				t.Fatal("a definition and an error")
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		canon := d.Canonical()
		d2, err := Parse("f.json", canon, testOpts)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%.500s", err, canon)
		}
		if !bytes.Equal(d2.Canonical(), canon) || d2.Revision() != d.Revision() {
			t.Fatalf("revision changed:\n%s\n%s", canon, d2.Canonical())
		}
		if !defsEqual(d, d2, false) {
			t.Fatalf("definition changed through its canonical form:\n%s", canon)
		}
	})
}

// FuzzCanonicalValues: any string and number a definition can hold
// survives the canonical form (the parser is not needed to produce them:
// YAML escapes can).
func FuzzCanonicalValues(f *testing.F) {
	f.Add("plain", 1.0, int64(1))
	f.Add("\x7f\u0085\u2028\ufeff<&>\"\\/", -0.0, int64(-1))
	f.Add("${{ 1 }}", 1e21, int64(1)<<62)
	f.Add("\t\n\r\x00 ", 1.5e-300, int64(0))
	f.Fuzz(func(t *testing.T, s string, x float64, i int64) {
		if !utf8.ValidString(s) || strings.Contains(s, "${{") || keyLength("k"+s) > MaxKeyLength || math.IsNaN(x) || math.IsInf(x, 0) {
			return // Parse refuses these
		}
		d := &Definition{
			Name: "f",
			Steps: []*Step{{
				ID:         "a",
				ContextSet: map[string]any{"k" + s: s, "x": x, "i": i},
				Output:     map[string]any{s: []any{s, x, i, nil, true}},
			}},
		}
		canon := d.Canonical()
		d2, err := Parse("f.json", canon, ParseOptions{})
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%.500s", err, canon)
		}
		if !reflect.DeepEqual(d2.Steps[0].ContextSet, d.Steps[0].ContextSet) || !reflect.DeepEqual(d2.Steps[0].Output, d.Steps[0].Output) {
			t.Fatalf("values changed:\n%#v\n%#v", d.Steps[0], d2.Steps[0])
		}
		if d2.Revision() != d.Revision() {
			t.Fatal("revision changed")
		}
	})
}
