package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaDef parses a definition whose input_schema is schema (JSON).
func schemaDef(t *testing.T, schema string) *Definition {
	t.Helper()
	d, err := Parse("t.yaml", []byte("name: t\ninput_schema: "+schema+"\n"+okSteps), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// snapshot is v as JSON, to tell whether v was modified.
func snapshot(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyDefaults(t *testing.T) {
	t.Parallel()
	type obj = map[string]any
	type list = []any
	cases := []struct {
		name   string
		schema string
		in     any
		want   any
	}{
		{"top level, with the number types of a decoded input",
			`{"type": "object", "properties": {"greeting": {"type": "string", "default": "hello"}, "n": {"type": "integer", "default": 3}, "ratio": {"default": 1.0}, "big": {"default": 2.5e3}, "on": {"default": false}, "none": {"default": null}}}`,
			obj{}, obj{"greeting": "hello", "n": int64(3), "ratio": 1.0, "big": 2500.0, "on": false, "none": nil}},
		{"present values and nulls are left alone",
			`{"properties": {"greeting": {"default": "hello"}, "n": {"default": 3}, "o": {"properties": {"x": {"default": 1}}}}}`,
			obj{"greeting": "hi", "n": nil, "o": nil}, obj{"greeting": "hi", "n": nil, "o": nil}},
		{"nested objects",
			`{"properties": {"opts": {"type": "object", "properties": {"retries": {"default": 3}, "mode": {"default": "fast"}, "deep": {"properties": {"x": {"default": "y"}}}}}}}`,
			obj{"opts": obj{"mode": "slow", "deep": obj{}}}, obj{"opts": obj{"mode": "slow", "retries": int64(3), "deep": obj{"x": "y"}}}},
		{"an absent object without a default stays absent",
			`{"properties": {"opts": {"type": "object", "properties": {"retries": {"default": 3}}}}}`,
			obj{"other": 1.5}, obj{"other": 1.5}},
		{"a default object gets the defaults of its properties",
			`{"properties": {"opts": {"type": "object", "default": {"mode": "fast"}, "properties": {"retries": {"default": 3}, "mode": {"default": "slow"}}}}}`,
			obj{}, obj{"opts": obj{"mode": "fast", "retries": int64(3)}}},
		{"arrays of objects",
			`{"properties": {"lines": {"type": "array", "items": {"properties": {"qty": {"default": 1}}}}}}`,
			obj{"lines": list{obj{"sku": "a"}, obj{"sku": "b", "qty": int64(5)}, "x", nil}},
			obj{"lines": list{obj{"sku": "a", "qty": int64(1)}, obj{"sku": "b", "qty": int64(5)}, "x", nil}}},
		{"prefixItems, then items",
			`{"properties": {"pair": {"prefixItems": [{"properties": {"a": {"default": 1}}}], "items": {"properties": {"b": {"default": 2}}}}}}`,
			obj{"pair": list{obj{}, obj{}, obj{"b": "x"}}}, obj{"pair": list{obj{"a": int64(1)}, obj{"b": int64(2)}, obj{"b": "x"}}}},
		{"an array gets no missing elements",
			`{"properties": {"pair": {"prefixItems": [{"default": 1}, {"default": 2}]}}}`,
			obj{"pair": list{}}, obj{"pair": list{}}},
		{"draft-07 items",
			`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"xs": {"items": {"properties": {"a": {"default": 1}}}}, "ys": {"items": [{"properties": {"a": {"default": 1}}}], "additionalItems": {"properties": {"b": {"default": 2}}}}}}`,
			obj{"xs": list{obj{}}, "ys": list{obj{}, obj{}}}, obj{"xs": list{obj{"a": int64(1)}}, "ys": list{obj{"a": int64(1)}, obj{"b": int64(2)}}}},
		{"$ref to $defs",
			`{"$defs": {"addr": {"type": "object", "properties": {"country": {"default": "NL"}}}}, "properties": {"ship": {"$ref": "#/$defs/addr"}, "bill": {"$ref": "#/$defs/addr"}}}`,
			obj{"ship": obj{}}, obj{"ship": obj{"country": "NL"}}},
		{"a default through $ref; the property's own first",
			`{"$defs": {"n": {"type": "number", "default": 7.0}}, "properties": {"n": {"$ref": "#/$defs/n"}, "m": {"$ref": "#/$defs/n", "default": 8}}}`,
			obj{}, obj{"n": 7.0, "m": int64(8)}},
		{"allOf, the first default winning",
			`{"allOf": [{"properties": {"a": {"default": 1}}}, {"properties": {"b": {"default": 2}, "a": {"default": 9}}}, {"$ref": "#/$defs/c"}], "$defs": {"c": {"properties": {"c": {"default": "c"}}}}}`,
			obj{}, obj{"a": int64(1), "b": int64(2), "c": "c"}},
		{"allOf branches describing one property both apply",
			`{"properties": {"o": {"properties": {"x": {"default": 1}}}}, "allOf": [{"properties": {"o": {"properties": {"y": {"default": 2}}}}}]}`,
			obj{"o": obj{}}, obj{"o": obj{"x": int64(1), "y": int64(2)}}},
		{"anyOf, oneOf, if/then/else, not, additionalProperties are not read",
			`{"anyOf": [{"properties": {"a": {"default": 1}}}], "oneOf": [{"properties": {"b": {"default": 2}}}], "if": {"properties": {"c": {"default": 3}}}, "then": {"properties": {"d": {"default": 4}}}, "else": {"properties": {"e": {"default": 5}}}, "additionalProperties": {"properties": {"f": {"default": 6}}}}`,
			obj{"z": obj{}}, obj{"z": obj{}}},
		{"a recursive $ref",
			`{"$defs": {"node": {"type": "object", "properties": {"label": {"default": "?"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`,
			obj{"children": list{obj{"children": list{obj{"label": "x"}, obj{}}}}},
			obj{"label": "?", "children": list{obj{"label": "?", "children": list{obj{"label": "x"}, obj{"label": "?"}}}}}},
		{"property names that need escaping in a pointer",
			`{"properties": {"a/b~c d%": {"default": 1.0}}}`,
			obj{}, obj{"a/b~c d%": 1.0}},
		{"the input is not an object",
			`{"properties": {"a": {"default": 1}}}`,
			list{obj{}}, list{obj{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := schemaDef(t, c.schema)
			before := snapshot(t, c.in)
			got, applied, err := d.ApplyDefaults(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %#v\nwant %#v", got, c.want)
			}
			if want := !reflect.DeepEqual(c.in, c.want); applied != want {
				t.Errorf("applied %v, want %v", applied, want)
			}
			if snapshot(t, c.in) != before {
				t.Errorf("the input was modified: %s, was %s", snapshot(t, c.in), before)
			}
			if err := d.ValidateInput(got); err != nil {
				t.Errorf("the result does not validate: %v", err)
			}
		})
	}
}

// TestApplyDefaultsRefCycle: a cycle of $ref through allOf compiles (the
// validator refuses it when it would follow it) and ends when the walk
// comes back to a schema it has read.
func TestApplyDefaultsRefCycle(t *testing.T) {
	t.Parallel()
	d := schemaDef(t, `{"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}], "properties": {"x": {"default": 1}}}, "b": {"allOf": [{"$ref": "#/$defs/a"}], "properties": {"y": {"default": 2}}}}, "$ref": "#/$defs/a"}`)
	got, _, err := d.ApplyDefaults(map[string]any{})
	if want := map[string]any{"x": int64(1), "y": int64(2)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v", got, err)
	}
}

func TestApplyDefaultsCopies(t *testing.T) {
	t.Parallel()
	d := schemaDef(t, `{"properties": {"o": {"default": {"k": [1, {"x": 2.0}]}}, "l": {"default": ["a"]}}}`)
	schema := snapshot(t, d.InputSchema)
	for range 2 {
		got, applied, err := d.ApplyDefaults(map[string]any{})
		if err != nil || !applied {
			t.Fatalf("applied %v, %v", applied, err)
		}
		want := map[string]any{"o": map[string]any{"k": []any{int64(1), map[string]any{"x": 2.0}}}, "l": []any{"a"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %#v", got)
		}
		// Changing the result changes neither the definition nor the next
		// result.
		m := got.(map[string]any)
		k := m["o"].(map[string]any)["k"].([]any)
		k[0] = "changed"
		k[1].(map[string]any)["x"] = "changed"
		m["l"].([]any)[0] = "changed"
		if s := snapshot(t, d.InputSchema); s != schema {
			t.Fatalf("the schema changed: %s", s)
		}
	}
}

func TestApplyDefaultsUnchanged(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a": int64(1)}
	for name, d := range map[string]*Definition{
		"no schema":                      {Name: "n"},
		"empty schema":                   {InputSchema: map[string]any{}},
		"a schema without defaults":      {InputSchema: map[string]any{"properties": map[string]any{"b": map[string]any{"type": "string"}}}},
		"a default already given":        {InputSchema: map[string]any{"properties": map[string]any{"a": map[string]any{"default": 2}}}},
		"a schema that does not compile": {InputSchema: map[string]any{"type": 5, "properties": map[string]any{"b": map[string]any{"default": 2}}}},
	} {
		got, applied, err := d.ApplyDefaults(in)
		if err != nil || applied {
			t.Errorf("%s: applied %v, %v", name, applied, err)
		}
		if fmt.Sprintf("%p", got) != fmt.Sprintf("%p", in) {
			t.Errorf("%s: got a new value %v", name, got)
		}
	}
	if got, applied, err := (&Definition{}).ApplyDefaults(nil); got != nil || applied || err != nil {
		t.Errorf("nil input: %v %v %v", got, applied, err)
	}
}

// TestApplyDefaultsBuiltInGo: a definition built in Go compiles its schema
// on use, and its defaults may be Go values of other types.
func TestApplyDefaultsBuiltInGo(t *testing.T) {
	t.Parallel()
	d := &Definition{InputSchema: map[string]any{"properties": map[string]any{
		"tags":  map[string]any{"default": []string{"a", "b"}},
		"n":     map[string]any{"default": 3},
		"ratio": map[string]any{"default": 2.0},
		"num":   map[string]any{"default": json.Number("4")},
	}}}
	got, _, err := d.ApplyDefaults(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tags": []any{"a", "b"}, "n": int64(3), "ratio": 2.0, "num": int64(4)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v", got)
	}
}

func TestApplyDefaultsCaps(t *testing.T) {
	t.Parallel()
	// A default that contains itself nests until the depth cap.
	d := schemaDef(t, `{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n", "default": {}}}}}, "$ref": "#/$defs/n"}`)
	in := map[string]any{}
	if _, _, err := d.ApplyDefaults(in); err == nil || !strings.Contains(err.Error(), "more than 64 levels deep") {
		t.Errorf("a default that contains itself: %v", err)
	}
	if len(in) != 0 {
		t.Errorf("the input was modified: %v", in)
	}
	// Present values nest as deep as they like when no default is due.
	deep := map[string]any{}
	for range 100 {
		deep = map[string]any{"next": deep}
	}
	inner := deep
	for range 100 {
		inner = inner["next"].(map[string]any)
	}
	inner["stop"] = true
	d = schemaDef(t, `{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}, "label": {"type": "string"}}}}, "$ref": "#/$defs/n"}`)
	if _, applied, err := d.ApplyDefaults(deep); err != nil || applied {
		t.Errorf("a deep input without defaults due: %v %v", applied, err)
	}

	// Defaults that refer twice to the next level double at each one: 2^11
	// values here, over a cap of 1,000.
	var defs []string
	defs = append(defs, `"d0": {"properties": {"leaf": {"default": 1}}}`)
	for i := 1; i <= 10; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d": {"properties": {"a": {"$ref": "#/$defs/d%d", "default": {}}, "b": {"$ref": "#/$defs/d%d", "default": {}}}}`, i, i-1, i-1))
	}
	d = schemaDef(t, `{"$defs": {`+strings.Join(defs, ", ")+`}, "$ref": "#/$defs/d10"}`)
	w := &defaultsWalk{doc: d.InputSchema, limit: 1000}
	if _, _, err := w.value(map[string]any{}, []*jsonschema.Schema{d.inputSchema}, 0); err == nil || !strings.Contains(err.Error(), "more than 1000 values") {
		t.Errorf("doubling defaults: %v", err)
	}
	got, _, err := d.ApplyDefaults(map[string]any{})
	if err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	if n := strings.Count(snapshot(t, got), `"leaf"`); n != 1<<10 {
		t.Errorf("%d leaves, want %d", n, 1<<10)
	}
}
