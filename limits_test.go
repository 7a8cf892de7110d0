package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// Config.Limits through the public API: static caps at Apply with a
// position, the input cap at Enqueue (no run created), the payload cap at
// Wake and Signal before anything is spent or stored, the for_each items
// cap at run time.
func TestLimitsThroughTheAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Limits: starflow.Limits{
		InputBytes: 64, PayloadBytes: 32, ForEachItems: 3, ForEachConcurrency: 2, MaxIterations: 5, NestingDepth: 2, SourceBytes: 4096,
	}})
	if got := h.eng.Limits(); got.InputBytes != 64 || got.ForEachInFlight != starflow.ForEachInFlightDefault {
		t.Fatalf("limits: %+v", got)
	}
	h.start()
	ctx := context.Background()

	apply := func(src string) error {
		_, err := h.eng.Apply(ctx, "t.yaml", []byte(src))
		return err
	}
	for _, c := range []struct{ src, want string }{
		{"name: a\nsteps:\n  - id: s\n    for_each: {items: '[1]', concurrency: 3, steps: [{id: x, context_set: {v: 1}}]}\n",
			"t.yaml:4:43: for_each s: concurrency 3 exceeds the limit of 2 (limits.for_each_concurrency"},
		{"name: a\nsteps:\n  - id: s\n    repeat_until: {steps: [{id: x, context_set: {v: 1}}], until: true, max_iterations: 6}\n",
			"t.yaml:4:88: repeat_until s: max_iterations 6 exceeds the limit of 5 (limits.max_iterations"},
		{"name: a\nsteps:\n  - id: s\n    try:\n      steps:\n        - id: t\n          try:\n            steps:\n              - id: u\n                try: {steps: [{id: x, context_set: {v: 1}}]}\n",
			"t.yaml:10:17: control flow nests more than 2 constructs deep"},
		{"name: a\nsteps:\n  - id: s\n    context_set: {v: '" + strings.Repeat("x", 5000) + "'}\n",
			"t.yaml: the definition source (5050 bytes) exceeds the limit of 4096 (limits.definition_bytes"},
	} {
		err := apply(c.src)
		var le *workflow.LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("apply: %v\nwant %q (a *workflow.LimitError)", err, c.want)
		}
	}

	h.apply(`name: loop
steps:
  - id: ship
    for_each:
      items: "${{ input.items }}"
      steps: [{id: x, context_set: {v: "${{ item }}"}}]
`)
	// Input over the cap: refused, no run.
	_, err := h.eng.Enqueue(ctx, "loop", json.RawMessage(`{"items": [1, 2, 3], "pad": "`+strings.Repeat("p", 60)+`"}`), nil)
	var le *workflow.LimitError
	if !errors.As(err, &le) || le.Limit != workflow.LimitInputBytes || !strings.Contains(err.Error(), "exceeds the limit of 64 (limits.input_bytes; raise it with --max-input-bytes") {
		t.Fatalf("enqueue over the input cap: %v", err)
	}
	if runs, err := h.store.ListRuns(ctx, &state.ListRunsParams{}); err != nil || len(runs) != 0 {
		t.Fatalf("runs after a refused enqueue: %d %v", len(runs), err)
	}
	// for_each items over the cap: the step fails, not retried.
	run, err := h.eng.Enqueue(ctx, "loop", map[string]any{"items": []int{1, 2, 3, 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunFailed || end.Attempt != 1 || !strings.Contains(end.Error, "for_each ship: 4 items exceed the limit of 3 (limits.for_each_items") {
		t.Fatalf("run over the items cap: %s attempt %d: %s", end.Status, end.Attempt, end.Error)
	}
	if run, err = h.eng.Enqueue(ctx, "loop", map[string]any{"items": []int{1, 2, 3}}, nil); err != nil {
		t.Fatal(err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run at the items cap: %s: %s", end.Status, end.Error)
	}

	// Payload over the cap: the signal is not stored, the token not spent.
	sink, srv := newNotifySink(t, h.store)
	h.apply("name: waiting\nsteps:\n  - id: w\n    wait: {signal: go, notify: {url: \"" + srv.URL + "\"}}\n")
	run = h.enqueue("waiting", nil)
	token, _ := sink.next(t)["token"].(string)
	awaitParked(t, h, run.ID)
	big := json.RawMessage(`"` + strings.Repeat("b", 40) + `"`)
	if _, err := h.eng.Signal(ctx, run.ID, "other", big); !errors.As(err, &le) || le.Limit != workflow.LimitPayloadBytes {
		t.Fatalf("signal over the payload cap: %v", err)
	}
	if _, err := h.eng.Wake(ctx, token, big); !errors.As(err, &le) ||
		!strings.Contains(err.Error(), "the payload (42 bytes as JSON) exceeds the limit of 32 (limits.payload_bytes; raise it with --max-payload-bytes") {
		t.Fatalf("wake over the payload cap: %v", err)
	}
	if w, err := h.eng.Wake(ctx, token, json.RawMessage(`{"ok": true}`)); err != nil || w.Status != starflowtype.WaitWoken {
		t.Fatalf("the token was spent by the refused wake: %+v %v", w, err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `{"ok":true}` {
		t.Fatalf("run %s: %s %s", end.Status, end.Output, end.Error)
	}
}

// TestStoredDefinitionRunsAsApplied: a revision stored before the caps
// and the names-in-scope check existed (here: a forward has(), a
// retry_policy on a construct, a concurrency over the cap) still runs:
// a runner executes a stored definition as it was applied.
func TestStoredDefinitionRunsAsApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	ctx := context.Background()
	src := `name: old
steps:
  - id: first
    when: "!has(steps.second.output)"
    context_set: {a: 1}
  - id: second
    retry_policy: {max_attempts: 2}
    for_each: {items: "[1, 2]", concurrency: 100, steps: [{id: x, context_set: {v: "${{ item }}"}}]}
`
	if _, err := h.eng.Parse("old.yaml", []byte(src)); err == nil {
		t.Fatal("the definition is valid today: the test proves nothing")
	}
	def, err := workflow.Parse("old.yaml", []byte(src), workflow.ParseOptions{Limits: workflow.NoLimits(), Stored: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.PutDefinition(ctx, &state.PutDefinitionParams{WorkspaceID: state.DefaultWorkspace, Name: def.Name,
		Revision: def.Revision(), Spec: def.Canonical(), Source: src}); err != nil {
		t.Fatal(err)
	}
	run, err := h.eng.Enqueue(ctx, "old", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `[{"v":1},{"v":2}]` {
		t.Fatalf("run %s: %s %s", end.Status, end.Output, end.Error)
	}
}
