package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Caps of ApplyDefaults. Each default filled in is walked again for the
// defaults inside it, so a property that refers back to its parent with
// "$ref" and has a default would nest forever (maxDefaultsDepth stops
// it), and defaults of $defs that refer twice to the next would double at
// each level (maxDefaults stops them). maxDefaults is far above what an
// input within the default limits.input_bytes (1 MiB) can hold once its
// defaults are written (at least 6 bytes each).
const (
	maxDefaultsDepth = 64
	maxDefaults      = 1_000_000
)

// ApplyDefaults fills in the "default"s of InputSchema that input lacks,
// before ValidateInput checks it. For every object in input that a schema
// describes with "properties", a property absent from the object and whose
// schema has a "default" gets a copy of it, in the values a decoded run
// input holds (an integer as int64; a number written with a fraction or
// an exponent, 1.0 too, as float64; map[string]any; []any). ApplyDefaults
// then walks the properties present (and the defaults just filled in, so a
// default of {} gets the defaults of its own properties), and the elements
// of arrays through "prefixItems" and "items".
//
// A schema is read with its "$ref" (to "$defs" of the same document:
// input_schema may refer to no other) and its "allOf" branches; a default
// comes from the property's own schema first, then what it refers to, in
// order. "anyOf", "oneOf", "if"/"then"/"else", "not", "dependentSchemas",
// "patternProperties", "additionalProperties", "$dynamicRef" and
// "$recursiveRef" are not read: which branch applies depends on the value,
// so a default there is ambiguous. A property present with the value null
// keeps it (null is a value), and an array gets no missing elements.
//
// input is decoded JSON (map[string]any, []any, string, float64, int64,
// json.Number, bool, nil) and is never modified. out is input itself when
// applied is false; otherwise it is a new value that shares the parts of
// input it did not change, so treat both as read-only. Without a schema,
// or when it does not compile (ValidateInput reports that), out is input.
// err is non-nil only when a default is due more than 64 levels deep or
// more than 1,000,000 would be filled in.
func (d *Definition) ApplyDefaults(input any) (out any, applied bool, err error) {
	if len(d.InputSchema) == 0 {
		return input, false, nil
	}
	sch := d.inputSchema
	if sch == nil {
		if sch, err = compileInputSchema(d.InputSchema); err != nil {
			return input, false, nil
		}
	}
	w := &defaultsWalk{doc: d.InputSchema, limit: maxDefaults}
	out, applied, err = w.value(input, []*jsonschema.Schema{sch}, 0)
	if err != nil {
		return input, false, err
	}
	return out, applied, nil
}

// defaultsWalk is one ApplyDefaults call.
type defaultsWalk struct {
	doc    map[string]any // InputSchema, where defaults are copied from
	limit  int            // of defaults filled in (maxDefaults)
	filled int            // defaults filled in so far
}

// value returns v with the defaults of schemas (which all describe v)
// applied, and whether it changed. v is at depth levels below the input.
func (w *defaultsWalk) value(v any, schemas []*jsonschema.Schema, depth int) (any, bool, error) {
	switch x := v.(type) {
	case map[string]any:
		return w.object(x, expand(schemas), depth)
	case []any:
		return w.array(x, expand(schemas), depth)
	}
	return v, false, nil
}

func (w *defaultsWalk) object(m map[string]any, schemas []*jsonschema.Schema, depth int) (any, bool, error) {
	props := map[string][]*jsonschema.Schema{}
	for _, s := range schemas {
		for name, ps := range s.Properties {
			props[name] = append(props[name], ps)
		}
	}
	var out map[string]any // a copy of m once something changes
	set := func(name string, v any) {
		if out == nil {
			out = make(map[string]any, len(m)+1)
			for k, e := range m {
				out[k] = e
			}
		}
		out[name] = v
	}
	// In name order, so that which cap error is reported does not vary.
	for _, name := range slices.Sorted(maps.Keys(props)) {
		pschemas := props[name]
		v, present := m[name]
		if !present {
			ds := defaultOf(pschemas)
			if ds == nil {
				continue
			}
			if depth >= maxDefaultsDepth {
				return nil, false, fmt.Errorf("input_schema: the default of %q is more than %d levels deep in the input (does a $ref loop carry a default?)", name, maxDefaultsDepth)
			}
			if w.filled++; w.filled > w.limit {
				return nil, false, fmt.Errorf("input_schema: its defaults would fill in more than %d values (do defaults contain each other through $ref?)", w.limit)
			}
			v, _, err := w.value(w.defaultValue(ds), pschemas, depth+1)
			if err != nil {
				return nil, false, err
			}
			set(name, v)
			continue
		}
		if depth >= maxDefaultsDepth {
			continue
		}
		nv, changed, err := w.value(v, pschemas, depth+1)
		if err != nil {
			return nil, false, err
		}
		if changed {
			set(name, nv)
		}
	}
	if out == nil {
		return m, false, nil
	}
	return out, true, nil
}

func (w *defaultsWalk) array(a []any, schemas []*jsonschema.Schema, depth int) (any, bool, error) {
	if depth >= maxDefaultsDepth {
		return a, false, nil
	}
	var out []any // a copy of a once something changes
	for i, e := range a {
		var items []*jsonschema.Schema
		for _, s := range schemas {
			if is := itemSchema(s, i); is != nil {
				items = append(items, is)
			}
		}
		if len(items) == 0 {
			continue
		}
		ne, changed, err := w.value(e, items, depth+1)
		if err != nil {
			return nil, false, err
		}
		if changed {
			if out == nil {
				out = slices.Clone(a)
			}
			out[i] = ne
		}
	}
	if out == nil {
		return a, false, nil
	}
	return out, true, nil
}

// itemSchema is the schema s gives the array element at index i, or nil:
// prefixItems then items (draft 2020-12), or items as one schema or a list
// then additionalItems (earlier drafts).
func itemSchema(s *jsonschema.Schema, i int) *jsonschema.Schema {
	if i < len(s.PrefixItems) {
		return s.PrefixItems[i]
	}
	if s.Items2020 != nil {
		return s.Items2020
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		return items
	case []*jsonschema.Schema:
		if i < len(items) {
			return items[i]
		}
		if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			return ai
		}
	}
	return nil
}

// expand returns schemas with, after each, what it refers to through $ref
// and allOf (depth first, in order), each schema once: a $ref loop ends
// at the schema it returns to. Boolean schemas (true, false) describe no
// properties and are left out.
func expand(schemas []*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.Bool == nil {
			out = append(out, s)
		}
		visit(s.Ref)
		for _, b := range s.AllOf {
			visit(b)
		}
	}
	for _, s := range schemas {
		visit(s)
	}
	return out
}

// defaultOf is the first schema with a default among schemas, read as
// expand orders them, or nil.
func defaultOf(schemas []*jsonschema.Schema) *jsonschema.Schema {
	for _, s := range expand(schemas) {
		if s.Default != nil {
			return s
		}
	}
	return nil
}

// defaultValue is a fresh copy of s's default. It is copied from the
// definition's InputSchema, found at s.Location, so that a float with an
// integral value (1.0) stays a float: the compiled schema reads its
// document through json.Marshal, which writes 1.0 as 1. When the
// document cannot be followed there (a schema built in Go with values of
// other types), it is the compiled default, whose numbers are int64 when
// integral.
func (w *defaultsWalk) defaultValue(s *jsonschema.Schema) any {
	if node, ok := lookup(w.doc, s.Location).(map[string]any); ok {
		if raw, ok := node["default"]; ok {
			if v, ok := jsonCopy(raw); ok {
				return v
			}
		}
	}
	v, _ := jsonCopy(*s.Default)
	return v
}

// lookup returns the value of doc at loc, a compiled schema's location
// (inputSchemaURL#/json/pointer with its tokens path-escaped), or nil.
func lookup(doc map[string]any, loc string) any {
	ptr, ok := strings.CutPrefix(loc, inputSchemaURL+"#")
	if !ok {
		return nil
	}
	var v any = doc
	if ptr == "" {
		return v
	}
	toks := strings.Split(ptr, "/")
	if toks[0] != "" {
		return nil
	}
	for _, tok := range toks[1:] {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return nil
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// jsonCopy deep-copies a JSON value into the values a run input decodes
// to: int64 for an integer that fits, float64 for other numbers,
// map[string]any and []any. A json.Number is an integer when it has no
// fraction or exponent. ok is false for a value of another type.
func jsonCopy(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, true
	case float64:
		return x, !math.IsInf(x, 0) && !math.IsNaN(x)
	case int:
		return int64(x), true
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i, true
			}
		}
		f, err := x.Float64()
		return f, err == nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var ok bool
			if out[i], ok = jsonCopy(e); !ok {
				return nil, false
			}
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, ok := jsonCopy(e)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	}
	return nil, false
}
