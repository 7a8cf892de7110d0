package workflow

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schema.json
var definitionSchema []byte

// Schema returns the JSON Schema (draft 2020-12) of the definition format,
// as published by `starflow schema` for editors. It checks the structure;
// Parse checks more (expressions, run_after targets and cycles, unique
// ids, durations, construct depth), and steps of custom types are checked loosely because
// the types are registered at run time.
func Schema() []byte { return bytes.Clone(definitionSchema) }

// inputSchemaURL names a definition's input_schema while it is compiled.
const inputSchemaURL = "urn:starflow:input_schema"

var printer = message.NewPrinter(language.English)

// noLoader refuses to load other documents: an input_schema must be
// self-contained (a definition must not make the server read files or
// fetch URLs).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("input_schema may not refer to other documents (%s)", url)
}

// compileInputSchema compiles an input_schema (draft 2020-12 unless it
// says otherwise with $schema; format assertions on).
func compileInputSchema(doc map[string]any) (sch *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			sch, err = nil, fmt.Errorf("input_schema: %v", r)
		}
	}()
	v, err := toJSONValue(doc)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(inputSchemaURL, v); err != nil {
		return nil, err
	}
	return c.Compile(inputSchemaURL)
}

// toJSONValue converts v to the values jsonschema expects (numbers as
// json.Number), through its JSON encoding.
func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// inputSchema decodes and compiles the input_schema field.
func (d *decoder) inputSchema(def *Definition, n *vnode) {
	if n.kind != vMap {
		d.typeError(n, "input_schema", "a mapping (a JSON Schema object)")
		return
	}
	if len(n.pairs) == 0 {
		return // {} accepts anything, as no schema does
	}
	doc, _ := n.value().(map[string]any)
	sch, err := compileInputSchema(doc)
	if err != nil {
		d.schemaError(n, err)
		return
	}
	def.InputSchema, def.inputSchema = doc, sch
}

// schemaError reports why input_schema does not compile, at the part of
// it that is wrong when the metaschema says which.
func (d *decoder) schemaError(n *vnode, err error) {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		seen := map[string]bool{}
		for _, leaf := range leaves(ve) {
			loc := pointer(leaf.InstanceLocation)
			if seen[loc] {
				continue
			}
			seen[loc] = true
			d.errs.add(locate(n, leaf.InstanceLocation), err, "input_schema is not a valid JSON Schema: at %s: %s", orRoot(loc), leaf.ErrorKind.LocalizedString(printer))
		}
		return
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), inputSchemaURL, "input_schema")), " ")
	d.errs.add(n.pos, err, "input_schema does not compile: %s", msg)
}

// leaves returns the innermost causes of a validation error.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// locate finds the position of the value at path (JSON pointer tokens)
// inside n, or the nearest enclosing one.
func locate(n *vnode, path []string) Pos {
	for _, tok := range path {
		var next *vnode
		switch n.kind {
		case vMap:
			for _, p := range n.pairs {
				if p.key == tok {
					next = p.val
				}
			}
		case vList:
			for i, it := range n.items {
				if fmt.Sprint(i) == tok {
					next = it
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.pos
}

// pointer formats path as a JSON pointer (RFC 6901).
func pointer(path []string) string {
	var b strings.Builder
	for _, tok := range path {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func orRoot(loc string) string {
	if loc == "" {
		return "the top level"
	}
	return loc
}

// InputError reports why a run input does not match the definition's
// input_schema.
type InputError struct {
	Violations []InputViolation
}

// InputViolation is one way the input does not match.
type InputViolation struct {
	// Location is the JSON pointer (RFC 6901) of the offending value in
	// the input; "" is the input itself.
	Location string
	// Message says what is wrong ("got string, want integer").
	Message string
}

// Error lists the violations.
func (e *InputError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = fmt.Sprintf("at %s: %s", orRoot(v.Location), v.Message)
	}
	return "input does not match input_schema: " + strings.Join(parts, "; ")
}

// ValidateInput checks a run input (decoded JSON: map[string]any, []any,
// string, float64, int64, json.Number, bool, nil; or any value
// encoding/json can marshal) against InputSchema. It returns nil when
// there is no schema or the input matches, an *InputError naming each
// offending JSON location when it does not, and another error when the
// input is not JSON or the schema does not compile.
func (d *Definition) ValidateInput(input any) (err error) {
	if len(d.InputSchema) == 0 {
		return nil
	}
	sch := d.inputSchema
	if sch == nil {
		if sch, err = compileInputSchema(d.InputSchema); err != nil {
			return fmt.Errorf("input_schema does not compile: %w", err)
		}
	}
	v, err := toJSONValue(input)
	if err != nil {
		return fmt.Errorf("input is not JSON: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("input_schema: validation failed: %v", r)
		}
	}()
	verr := sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return verr
	}
	ie := &InputError{}
	for _, leaf := range leaves(ve) {
		ie.Violations = append(ie.Violations, InputViolation{
			Location: pointer(leaf.InstanceLocation),
			Message:  leaf.ErrorKind.LocalizedString(printer),
		})
	}
	return ie
}
