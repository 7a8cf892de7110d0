package jsonvalue

import (
	"reflect"
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
	if _, err := Decode([]byte(`1 2`)); err == nil {
		t.Fatal("trailing data accepted")
	}
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
