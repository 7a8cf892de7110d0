package starflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/workflow"
)

const defaultsWorkflow = `
name: greet
input_schema:
  type: object
  required: [greeting]
  properties:
    greeting: {type: string, default: hello}
    count: {type: integer, default: 2}
    opts:
      type: object
      default: {}
      properties:
        ratio: {type: number, default: 1.0}
steps:
  - id: a
    context_set: {x: 1}
output:
  greeting: "${{ input.greeting }}"
  count: "${{ input.count + 1 }}"
  ratio: "${{ input.opts.ratio * 2.0 }}"
`

// TestInputDefaultsOnEnqueue: the defaults of input_schema are filled in
// before the input is checked, the run keeps the input with them, and
// expressions read them with their types (1.0 stays a double).
func TestInputDefaultsOnEnqueue(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	in := map[string]any{"name": "x"}
	run := h.runToEnd(defaultsWorkflow, in)
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	if len(in) != 1 {
		t.Errorf("the caller's input was modified: %v", in)
	}
	var stored map[string]any
	if err := json.Unmarshal(run.Input, &stored); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "x", "greeting": "hello", "count": 2.0, "opts": map[string]any{"ratio": 1.0}}
	if !reflect.DeepEqual(stored, want) || !bytes.Contains(run.Input, []byte(`"ratio":1.0`)) {
		t.Errorf("stored input %s", run.Input)
	}
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"greeting": "hello", "count": 3.0, "ratio": 2.0}; !reflect.DeepEqual(out, want) {
		t.Errorf("output %s", run.Output)
	}

	// Values given are kept, and an input that needs no default is stored
	// as it was sent.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	given := json.RawMessage(`{"greeting": "hi",  "count": 5, "opts": {"ratio": 0.5}}`)
	run, err := h.eng.Enqueue(ctx, "greet", given, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = h.eng.WaitRun(ctx, run.ID); err != nil || run.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %v: %v", run, err)
	}
	if !bytes.Equal(run.Input, given) {
		t.Errorf("stored input %s, sent %s", run.Input, given)
	}
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"greeting": "hi", "count": 6.0, "ratio": 1.0}; !reflect.DeepEqual(out, want) {
		t.Errorf("output %s", run.Output)
	}

	// A null given is a value: the default does not replace it, and the
	// schema refuses it.
	_, err = h.eng.Enqueue(ctx, "greet", map[string]any{"greeting": nil}, nil)
	var ie *workflow.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "at /greeting: got null, want string") {
		t.Errorf("null greeting: %v", err)
	}
}

// TestInputDefaultViolatesSchema: a default is checked with the rest of
// the input, and one the schema refuses is an input error at enqueue.
func TestInputDefaultViolatesSchema(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	d := h.apply(`
name: bad-default
input_schema:
  type: object
  properties:
    n: {type: integer, default: three}
steps:
  - id: a
    context_set: {x: 1}
`)
	_, err := h.eng.Enqueue(context.Background(), d.Name, map[string]any{}, nil)
	var ie *workflow.InputError
	if !errors.Is(err, starflowtype.ErrInvalid) || !errors.As(err, &ie) || len(ie.Violations) != 1 || ie.Violations[0].Location != "/n" {
		t.Fatalf("want an input error at /n, got %v", err)
	}
	// Given, a valid value is accepted.
	if _, err := h.eng.EnqueueParams(context.Background(), d.Name, map[string]any{"n": 3}, nil); err != nil {
		t.Fatal(err)
	}
}
