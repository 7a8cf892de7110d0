package workflow

import (
	"bytes"
	"testing"
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
			t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
		}
		if !bytes.Equal(d2.Canonical(), canon) || d2.Revision() != d.Revision() {
			t.Fatalf("revision changed:\n%s\n%s", canon, d2.Canonical())
		}
		if !defsEqual(d, d2, false) {
			t.Fatalf("definition changed through its canonical form:\n%s", canon)
		}
	})
}
