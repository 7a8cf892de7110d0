package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/starflow/starflow/step"
)

func TestCheckReserved(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"a":1,"b":[{"c":"__celestialBlob"}]}`, ""}, // a value, not a key
		{`"__celestialBlob"`, ""},
		{`{"__celestialBlob":"x","size_bytes":1}`, `output holds the reserved key "__celestialBlob" at the top level`},
		{`{"body":{"data":[1,{"__celestialWait":{}}]}}`, `output holds the reserved key "__celestialWait" at body.data[1]`},
		{`[[{"k":{"__celestial":0}}]]`, `output holds the reserved key "__celestial" at [0][0].k`},
		{`{"z":{"__celestialB":1},"a":{"__celestialA":1}}`, `output holds the reserved key "__celestialA" at a`},
		{`{"_celestial":1,"celestial__":2}`, ""},
	}
	for _, c := range cases {
		err := checkReserved("output", []byte(c.doc))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want no error", c.doc, err)
			}
			continue
		}
		var bad unencodable
		if !errors.As(err, &bad) || !step.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a permanent unencodable error with %q", c.doc, err, c.want)
		}
	}
}
