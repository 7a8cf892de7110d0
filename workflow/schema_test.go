package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "https://github.com/starflow/starflow/workflow/definition.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("the published schema does not compile: %v", err)
	}
	return sch
}

// document decodes a definition's source as plain JSON values, the way an
// editor sees it.
func document(t *testing.T, src string) any {
	t.Helper()
	errs := &errorList{file: "t"}
	root := readYAML(newSource([]byte(src)), errs)
	if root == nil {
		t.Fatalf("cannot read: %v", errs.result())
	}
	v, err := toJSONValue(root.value())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchema(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	var meta map[string]any
	if err := json.Unmarshal(Schema(), &meta); err != nil {
		t.Fatal(err)
	}
	if meta["$schema"] != "https://json-schema.org/draft/2020-12/schema" || meta["additionalProperties"] != false {
		t.Errorf("schema header: %v %v", meta["$schema"], meta["additionalProperties"])
	}
	for name, src := range validDefs {
		if err := sch.Validate(document(t, src)); err != nil {
			t.Errorf("%s does not validate against the schema: %v", name, err)
		}
	}
	invalid := map[string]string{
		"unknown root field":       "name: a\nnmae: b\n" + okSteps,
		"missing steps":            "name: a\n",
		"empty steps":              "name: a\nsteps: []\n",
		"bad name":                 "name: A\n" + okSteps,
		"unknown step field":       "name: a\nsteps:\n  - id: a\n    retry_polcy: {}\n    fail: {message: x}\n",
		"two kinds":                "name: a\nsteps:\n  - id: a\n    fail: {message: x}\n    context_set: {x: 1}\n",
		"no kind":                  "name: a\nsteps:\n  - id: a\n    when: true\n",
		"wait two forms":           "name: a\nsteps:\n  - id: a\n    wait: {signal: x, timer: 1m}\n",
		"wait no form":             "name: a\nsteps:\n  - id: a\n    wait: {timeout: 1m}\n",
		"workflow_call no name":    "name: a\nsteps:\n  - id: a\n    workflow_call: {input: {}}\n",
		"session_write no value":   "name: a\nsteps:\n  - id: a\n    session_write: {session: s, key: k}\n",
		"unknown service_call key": "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', verb: GET}\n",
		"recovery_mode":            "name: a\nrecovery_mode: retry\n" + okSteps,
		"retry_policy":             "name: a\ndefaults: {retry_policy: {backoff: 0.5}}\n" + okSteps,
		"duration":                 "name: a\ndefaults: {timeout: 1d}\n" + okSteps,
		"reserved prefix":          "name: a\nsteps:\n  - id: a\n    context_set: {__celestialWait: 1}\n",
		"secret name":              "name: a\nsecrets: [9X]\n" + okSteps,
		"output null":              "name: a\noutput: null\n" + okSteps,
		"expect_status":            "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', expect_status: [600]}\n",
	}
	for name, src := range invalid {
		if err := sch.Validate(document(t, src)); err == nil {
			t.Errorf("%s: validates against the schema", name)
		}
		if _, err := Parse("t.yaml", []byte(src), testOpts); err == nil {
			t.Errorf("%s: Parse accepts it", name)
		}
	}
}

func TestValidateInput(t *testing.T) {
	t.Parallel()
	d, err := Parse("full.yaml", []byte(validDefs["full.yaml"]), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []any{
		map[string]any{"sku": "A1", "qty": int64(2)},
		map[string]any{"sku": "A1", "qty": 2.0, "email": "a@example.com"},
		map[string]any{"sku": "A1", "qty": json.Number("3")},
		struct {
			SKU string `json:"sku"`
			Qty int    `json:"qty"`
		}{"A1", 1},
	} {
		if err := d.ValidateInput(in); err != nil {
			t.Errorf("%v: %v", in, err)
		}
	}
	err = d.ValidateInput(map[string]any{"sku": "", "qty": "two", "email": "nope"})
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("want *InputError, got %v", err)
	}
	locs := map[string]string{}
	for _, v := range ie.Violations {
		locs[v.Location] = v.Message
	}
	for _, loc := range []string{"/sku", "/qty", "/email"} {
		if locs[loc] == "" {
			t.Errorf("no violation at %s: %v", loc, err)
		}
	}
	if !strings.Contains(err.Error(), "at /qty: got string, want integer") {
		t.Errorf("message: %v", err)
	}
	err = d.ValidateInput([]any{1})
	if !errors.As(err, &ie) || ie.Violations[0].Location != "" || !strings.Contains(err.Error(), "at the top level: got array, want object") {
		t.Errorf("top level: %v", err)
	}
	if err := d.ValidateInput(map[string]any{"qty": int64(1)}); err == nil || !strings.Contains(err.Error(), "sku") {
		t.Errorf("missing property: %v", err)
	}

	// Without a schema anything goes; a definition built in Go compiles
	// its schema on use.
	none := &Definition{Name: "n"}
	if err := none.ValidateInput(map[string]any{"x": 1}); err != nil {
		t.Error(err)
	}
	built := &Definition{InputSchema: map[string]any{"type": "object", "required": []any{"x"}}}
	if err := built.ValidateInput(map[string]any{"x": 1}); err != nil {
		t.Error(err)
	}
	if err := built.ValidateInput(map[string]any{}); err == nil {
		t.Error("missing x accepted")
	}
	bad := &Definition{InputSchema: map[string]any{"type": 5}}
	if err := bad.ValidateInput(nil); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("bad schema: %v", err)
	}
	if err := built.ValidateInput(func() {}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("not JSON: %v", err)
	}
}
