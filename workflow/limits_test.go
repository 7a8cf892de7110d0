package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLimitsRaisedAndLifted(t *testing.T) {
	t.Parallel()
	src := step1("    for_each:\n      items: input.xs\n      concurrency: 1000000\n      steps:\n        - id: x\n          repeat_until: {steps: [{id: y, context_set: {v: 1}}], until: true, max_iterations: 1000000}\n")
	if _, err := Parse("t.yaml", []byte(src), ParseOptions{}); err == nil {
		t.Fatal("over the default caps: accepted")
	}
	raised := Limits{ForEachConcurrency: 1_000_000, MaxIterations: 1_000_000}
	if _, err := Parse("t.yaml", []byte(src), ParseOptions{Limits: raised}); err != nil {
		t.Fatalf("caps raised: %v", err)
	}
	if _, err := Parse("t.yaml", []byte(src), ParseOptions{Limits: NoLimits()}); err != nil {
		t.Fatalf("no limits: %v", err)
	}
	if _, err := Parse("deep.yaml", []byte(nest(40)), ParseOptions{Limits: Limits{NestingDepth: 40}}); err != nil {
		t.Fatalf("nesting raised to 40: %v", err)
	}
	_, err := Parse("deep.yaml", []byte(nest(3)), ParseOptions{Limits: Limits{NestingDepth: 2}})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitNestingDepth || le.Max != 2 || le.Value != 3 {
		t.Fatalf("nesting lowered to 2: %v (%+v)", err, le)
	}
	if !strings.Contains(err.Error(), "deep.yaml:10:17: control flow nests more than 2 constructs deep: step \"txx\" is construct 3 of its nest, which exceeds the limit of 2 (limits.nesting_depth; raise it with --max-nesting-depth, STARFLOW_MAX_NESTING_DEPTH or starflow.Config.Limits.NestingDepth)") {
		t.Errorf("message: %v", err)
	}
}

func TestLimitsSourceSize(t *testing.T) {
	t.Parallel()
	src := okSteps + "# " + strings.Repeat("x", 100) + "\nname: a\n"
	if _, err := Parse("big.yaml", []byte(src), ParseOptions{Limits: Limits{SourceBytes: int64(len(src))}}); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	_, err := Parse("big.yaml", []byte(src), ParseOptions{Limits: Limits{SourceBytes: 100}})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitSourceBytes {
		t.Fatalf("over the cap: %v", err)
	}
	want := "big.yaml: the definition source (" + strconv.Itoa(len(src)) + " bytes) exceeds the limit of 100 (limits.definition_bytes; raise it with --max-definition-bytes, STARFLOW_MAX_DEFINITION_BYTES or starflow.Config.Limits.SourceBytes)"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}

	// A file of 4 GiB (sparse) is refused without being read whole.
	path := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	_, err = ParseFile(path, ParseOptions{})
	if !errors.As(err, &le) || le.Value != 4<<30 || le.Max != SourceBytesDefault {
		t.Fatalf("huge file: %v", err)
	}
	if !strings.Contains(err.Error(), "the definition source (4294967296 bytes) exceeds the limit of 1048576") {
		t.Errorf("message: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing a 4 GiB file took %s: it was read", d)
	}
}

func TestLimitErrorMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want string
	}{
		{Limits{}.CheckForEachItems("ship", 1_000_000), "for_each ship: 1000000 items exceed the limit of 10000 (limits.for_each_items; raise it with --max-for-each-items, STARFLOW_MAX_FOR_EACH_ITEMS or starflow.Config.Limits.ForEachItems)"},
		{Limits{}.CheckInput(2 << 20), "the run input (2097152 bytes as JSON) exceeds the limit of 1048576 (limits.input_bytes; raise it with --max-input-bytes, STARFLOW_MAX_INPUT_BYTES or starflow.Config.Limits.InputBytes)"},
		{Limits{PayloadBytes: 10}.CheckPayload(11), "the payload (11 bytes as JSON) exceeds the limit of 10 (limits.payload_bytes; raise it with --max-payload-bytes, STARFLOW_MAX_PAYLOAD_BYTES or starflow.Config.Limits.PayloadBytes)"},
		{Limits{}.CheckChildDepth("me", "recurse", 32), "workflow_call me: the child run of recurse would be at depth 33 (this run is 32 workflow_calls below its root run), which exceeds the limit of 32 (limits.child_depth; raise it with --max-child-depth, STARFLOW_MAX_CHILD_DEPTH or starflow.Config.Limits.ChildDepth)"},
		{Limits{ChildDepth: 1}.CheckChildDepth("me", "leaf", 1), "workflow_call me: the child run of leaf would be at depth 2 (this run is 1 workflow_call below its root run), which exceeds the limit of 1 (limits.child_depth; raise it with --max-child-depth, STARFLOW_MAX_CHILD_DEPTH or starflow.Config.Limits.ChildDepth)"},
	}
	for _, c := range cases {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("got  %v\nwant %s", c.err, c.want)
		}
	}
	for _, err := range []error{
		Limits{}.CheckForEachItems("ship", 10_000), Limits{}.CheckInput(1 << 20), Limits{}.CheckPayload(1 << 20),
		Limits{ForEachItems: -1}.CheckForEachItems("ship", 1<<30), NoLimits().CheckInput(1 << 30), NoLimits().CheckPayload(1 << 30),
		Limits{}.CheckChildDepth("me", "x", 0), Limits{}.CheckChildDepth("me", "x", 31), Limits{ChildDepth: -1}.CheckChildDepth("me", "x", 1<<20),
	} {
		if err != nil {
			t.Errorf("at or under the cap: %v", err)
		}
	}
	if n := (Limits{}).InFlight(1_000_000, 1_000_000); n != ForEachInFlightDefault {
		t.Errorf("in flight = %d", n)
	}
	if n := (Limits{}).InFlight(4, 2); n != 2 {
		t.Errorf("in flight = %d", n)
	}
}

// TestParseStored: ParseOptions.Stored leaves out the refusals that are
// not about the format (names out of scope, retry_policy without effect),
// and NoLimits the caps, so a revision applied before them still parses;
// format errors are still reported.
func TestParseStored(t *testing.T) {
	t.Parallel()
	src := step1("    when: has(steps.t.output) && item == 1\n    retry_policy: {max_attempts: 2}\n    for_each: {items: '[1]', concurrency: 100, steps: [{id: x, context_set: {v: 1}}]}\n  - id: t\n    context_set: {y: \"${{ error }}\"}\n")
	if _, err := Parse("t.yaml", []byte(src), ParseOptions{}); err == nil {
		t.Fatal("accepted as a new definition")
	}
	stored := ParseOptions{Limits: NoLimits(), Stored: true}
	if _, err := Parse("t.yaml", []byte(src), stored); err != nil {
		t.Fatalf("stored: %v", err)
	}
	if _, err := Parse("t.yaml", []byte(step1("    context_set: {x: \"${{ 1 + }}\"}\n")), stored); err == nil {
		t.Fatal("stored: an expression that does not compile was accepted")
	}
}
