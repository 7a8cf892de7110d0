package workflow

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, name, src string) *Definition {
	t.Helper()
	d, err := Parse(name, []byte(src), testOpts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func TestConstructsModel(t *testing.T) {
	t.Parallel()
	d := mustParse(t, "constructs.yaml", constructDefs["constructs.yaml"])

	var order []string
	d.Walk(func(s *Step, list []*Step) bool {
		order = append(order, s.ID+":"+s.Kind())
		if !slices.Contains(list, s) {
			t.Errorf("Walk: %s is not in the list it is given with", s.ID)
		}
		if s.Pos.Line == 0 || s.Pos.Column == 0 {
			t.Errorf("step %s: no position", s.ID)
		}
		return true
	})
	want := []string{
		"load:context_set", "ship:try", "fanout:parallel",
		"log:service_call", "count:context_set", "after-both:notify", // lane audit before lane email
		"per-order:for_each", "send:service_call", "mark:context_set",
		"report:context_set", "cleanup:notify",
		"poll:repeat_until", "check:service_call", "touch-all:for_each", "touch:service_call",
		"decide:if", "done:context_set", "nothing:fail",
	}
	if !slices.Equal(order, want) {
		t.Errorf("Walk order:\n got %v\nwant %v", order, want)
	}

	var top []string
	d.Walk(func(s *Step, _ []*Step) bool {
		top = append(top, s.ID)
		return false
	})
	if !slices.Equal(top, []string{"load", "ship", "poll", "decide"}) {
		t.Errorf("Walk without descending: %v", top)
	}

	ship := d.StepByID("ship")
	if ship == nil || ship.Try == nil || len(ship.Children()) != 3 || ship.Children()[1][0].ID != "report" || ship.Children()[2][0].ID != "cleanup" {
		t.Fatalf("ship = %+v", ship)
	}
	if ship.Timeout == 0 || !ship.IsConstruct() || d.StepByID("load").IsConstruct() {
		t.Error("ship fields")
	}
	fan := d.StepByID("fanout").Parallel
	if fan.FailsFast() || *fan.FailFast || !slices.Equal(fan.LaneNames(), []string{"audit", "email"}) {
		t.Errorf("fanout = %+v", fan)
	}
	fe := d.StepByID("per-order").ForEach
	if fe.Items != "variables.orders" || fe.As != "order" || fe.Concurrency != 4 || fe.ItemName() != "order" || fe.Workers() != 4 {
		t.Errorf("per-order = %+v", fe)
	}
	touch := d.StepByID("touch-all").ForEach
	if touch.As != "item" || touch.Concurrency != 1 {
		t.Errorf("defaults not filled in: %+v", touch)
	}
	ru := d.StepByID("poll").RepeatUntil
	if ru.MaxIterations != 10 || ru.Until != "${{ steps.check.output.body.ready == true }}" || len(ru.Steps) != 2 {
		t.Errorf("poll = %+v", ru)
	}
	iff := d.StepByID("decide")
	if iff.When != "input.enabled" || iff.If.Condition != "size(variables.orders) > 0" || iff.If.Else[0].Fail.Message != "no orders" {
		t.Errorf("decide = %+v", iff.If)
	}
	if d.StepByID("touch").Pos != (Pos{Line: 56, Column: 17}) {
		t.Errorf("touch at %+v", d.StepByID("touch").Pos)
	}
	if d.StepByID("nope") != nil || d.Ancestors("nope") != nil {
		t.Error("unknown id found")
	}

	var path []string
	for _, s := range d.Ancestors("send") {
		path = append(path, s.ID)
	}
	if !slices.Equal(path, []string{"ship", "fanout", "per-order"}) {
		t.Errorf("Ancestors(send) = %v", path)
	}
	if a := d.Ancestors("load"); a == nil || len(a) != 0 {
		t.Errorf("Ancestors(load) = %v", a)
	}

	audit := fan.Lanes["audit"]
	for i, want := range [][]string{nil, {}, {"log", "count"}} {
		got := DependsOn(audit, i)
		if !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("DependsOn(audit, %d) = %#v, want %#v", i, got, want)
		}
	}
	if got := DependsOn(d.Steps, 1); !slices.Equal(got, []string{"load"}) {
		t.Errorf("DependsOn(top, 1) = %v", got)
	}
	if got := DependsOn(d.Steps, 2); !slices.Equal(got, []string{"load"}) {
		t.Errorf("DependsOn(top, 2) = %v", got)
	}
}

// TestConstructDefaults: the canonical form writes the defaults of as,
// concurrency and fail_fast, so writing them out does not change the
// revision, and a definition built in Go with zero values has the same.
func TestConstructDefaults(t *testing.T) {
	t.Parallel()
	implicit := mustParse(t, "small.yaml", constructDefs["small-constructs.yaml"])
	explicit := mustParse(t, "explicit.yaml", constructDefs["explicit-defaults.yaml"])
	if !bytes.Equal(implicit.Canonical(), explicit.Canonical()) {
		t.Fatalf("canonical forms differ:\n%s\n%s", implicit.Canonical(), explicit.Canonical())
	}
	canon := string(implicit.Canonical())
	for _, frag := range []string{`"as":"item","concurrency":1,`, `"fail_fast":true`} {
		if !strings.Contains(canon, frag) {
			t.Errorf("canonical form lacks %s: %s", frag, canon)
		}
	}

	built := &Definition{Name: "g", Steps: []*Step{
		{ID: "each", ForEach: &ForEach{Items: "input.xs", Steps: []*Step{{ID: "a", ContextSet: map[string]any{"x": 1.0}}}}},
		{ID: "lanes", Parallel: &Parallel{Lanes: map[string][]*Step{"b": {{ID: "b", Fail: &Fail{Message: "m"}}}}}},
	}}
	parsed := mustParse(t, "g.yaml", `name: g
steps:
  - id: each
    for_each: {items: input.xs, as: item, concurrency: 1, steps: [{id: a, context_set: {x: 1.0}}]}
  - id: lanes
    parallel: {fail_fast: true, lanes: {b: [{id: b, fail: {message: m}}]}}
`)
	if built.Revision() != parsed.Revision() {
		t.Errorf("built in Go:\n%s\nparsed:\n%s", built.Canonical(), parsed.Canonical())
	}
	off := mustParse(t, "off.yaml", "name: g\nsteps:\n  - id: lanes\n    parallel: {fail_fast: false, lanes: {b: [{id: b, fail: {message: m}}]}}\n")
	if !strings.Contains(string(off.Canonical()), `"fail_fast":false`) {
		t.Errorf("fail_fast false: %s", off.Canonical())
	}
}

// TestRunAfterEmpty: run_after: [] (no dependency) and no run_after (after
// the step before) are different definitions, and stay so through the
// canonical form.
func TestRunAfterEmpty(t *testing.T) {
	t.Parallel()
	base := "name: r\nsteps:\n  - id: a\n    context_set: {x: 1}\n  - id: b\n"
	absent := mustParse(t, "absent.yaml", base+"    context_set: {y: 1}\n")
	empty := mustParse(t, "empty.yaml", base+"    run_after: []\n    context_set: {y: 1}\n")
	if absent.Steps[1].RunAfter != nil || empty.Steps[1].RunAfter == nil || len(empty.Steps[1].RunAfter) != 0 {
		t.Fatalf("RunAfter: %#v %#v", absent.Steps[1].RunAfter, empty.Steps[1].RunAfter)
	}
	if absent.Revision() == empty.Revision() {
		t.Fatal("run_after: [] and no run_after have the same revision")
	}
	if !strings.Contains(string(empty.Canonical()), `{"id":"b","run_after":[],"context_set"`) || strings.Contains(string(absent.Canonical()), "run_after") {
		t.Errorf("canonical forms:\n%s\n%s", absent.Canonical(), empty.Canonical())
	}
	again := mustParse(t, "again.json", string(empty.Canonical()))
	if ra := again.Steps[1].RunAfter; ra == nil || len(ra) != 0 {
		t.Errorf("through the canonical form: %#v", ra)
	}
	if got := DependsOn(empty.Steps, 1); got == nil || len(got) != 0 {
		t.Errorf("DependsOn = %#v", got)
	}
	// Several roots, and a step joining them: no cycle.
	mustParse(t, "roots.yaml", "name: r\nsteps:\n  - id: a\n    run_after: []\n    context_set: {x: 1}\n  - id: b\n    run_after: []\n    context_set: {y: 1}\n  - id: c\n    run_after: [b, a]\n    context_set: {z: 1}\n")
}

// TestCanonicalYAMLvsJSONConstructs: the same constructs in YAML and in
// JSON, other key orders, have one revision.
func TestCanonicalYAMLvsJSONConstructs(t *testing.T) {
	t.Parallel()
	y := mustParse(t, "c.yaml", `name: c
steps:
  - id: loop
    repeat_until:
      max_iterations: 3
      until: variables.n >= 3
      steps:
        - id: each
          for_each:
            steps:
              - {id: inc, context_set: {n: "${{ x + 1 }}"}}
            as: x
            items: "[1, 2.0]"
  - id: branch
    if:
      else: [{id: no, fail: {message: "n=${{ variables.n }}"}}]
      then: [{id: yes, context_set: {ok: true}}]
      condition: "${{ variables.n == 3 }}"
  - id: lanes
    parallel:
      lanes:
        b: [{id: lb, context_set: {b: 1}}]
        a: [{id: la, run_after: [], context_set: {a: 1}}]
  - id: guard
    try:
      finally: [{id: fin, context_set: {f: 1}}]
      steps: [{id: body, fail: {message: x}}]
`)
	j := mustParse(t, "c.json", `{"steps": [
  {"repeat_until": {"steps": [{"for_each": {"items": "[1, 2.0]", "as": "x", "concurrency": 1, "steps": [{"context_set": {"n": "${{ x + 1 }}"}, "id": "inc"}]}, "id": "each"}],
    "until": "variables.n >= 3", "max_iterations": 3}, "id": "loop"},
  {"id": "branch", "if": {"condition": "${{ variables.n == 3 }}", "then": [{"id": "yes", "context_set": {"ok": true}}], "else": [{"id": "no", "fail": {"message": "n=${{ variables.n }}"}}]}},
  {"id": "lanes", "parallel": {"fail_fast": true, "lanes": {"a": [{"run_after": [], "id": "la", "context_set": {"a": 1}}], "b": [{"id": "lb", "context_set": {"b": 1}}]}}},
  {"id": "guard", "try": {"steps": [{"id": "body", "fail": {"message": "x"}}], "finally": [{"id": "fin", "context_set": {"f": 1}}]}}
], "name": "c"}`)
	if !bytes.Equal(y.Canonical(), j.Canonical()) {
		t.Fatalf("canonical forms differ:\n%s\n%s", y.Canonical(), j.Canonical())
	}
	if !defsEqual(y, j, false) {
		t.Error("definitions differ")
	}
}

func TestConstructDepth(t *testing.T) {
	t.Parallel()
	mustParse(t, "deep.yaml", nest(MaxConstructDepth))
	_, err := Parse("deep.yaml", []byte(nest(MaxConstructDepth+20)), testOpts)
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) != 1 || !strings.Contains(err.Error(), "control flow nests more than 32 constructs deep") {
		t.Fatalf("got %v", err)
	}
}

// TestLoopVariables: expressions in a for_each body may use its `as`
// name; errors in them are reported in the author's words.
func TestLoopVariables(t *testing.T) {
	t.Parallel()
	body := func(as, expr string) string {
		return "name: l\nsteps:\n  - id: each\n    for_each:\n      as: " + as + "\n      items: input.xs\n      steps:\n        - id: x\n          context_set: {v: \"" + expr + "\"}\n"
	}
	for _, e := range []string{
		"${{ o }}", "${{ o.n + 1 }}", "a ${{ o.n }} b ${{ o['k'] }}", "${{ [1].map(o, o + 1) }}",
		"${{ has(o.n) ? o.n : input.o }}", "${{ 'o' + string(o) }}", "${{ r'o' + o.s }}",
		"${{ o // comment\n }}", "${{ {'a': o}.a }}", "${{ b\\\"o\\\" == o.bytes }}",
	} {
		if _, err := Parse("l.yaml", []byte(body("o", e)), testOpts); err != nil {
			t.Errorf("%q: %v", e, err)
		}
	}
	for _, c := range []struct{ expr, want string }{
		// The error is in the author's text, loop variable complaints left out.
		{"${{ o.n + nosuch(o) }}", `t.yaml:9:29: context_set.v: expression "o.n + nosuch(o)": 1:13: undeclared reference to 'nosuch' | o.n + nosuch(o)`},
		// A later expression of the same string: its own position.
		{"${{ o.n }} and ${{ 1 + }}", `t.yaml:9:44: context_set.v: expression "1 +"`},
		// Another name is still undeclared.
		{"${{ p.n }}", `t.yaml:9:29: context_set.v: expression "p.n": 1:1: undeclared reference to 'p'`},
	} {
		_, err := Parse("t.yaml", []byte(body("o", c.expr)), testOpts)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v\nwant %s", c.expr, err, c.want)
		}
		if err != nil && c.expr != "${{ p.n }}" && strings.Contains(err.Error(), "'o'") {
			t.Errorf("%q: complains about the loop variable: %v", c.expr, err)
		}
	}
}

func TestSchemaConstructs(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	for name, src := range map[string]string{
		"if without then":       step1("    if: {condition: true}\n"),
		"if else empty":         step1("    if: {condition: true, then: [{id: x, fail: {message: m}}], else: []}\n"),
		"try unknown field":     step1("    try: {steps: [{id: x, fail: {message: m}}], cach: []}\n"),
		"max_iterations zero":   step1("    repeat_until: {steps: [{id: x, fail: {message: m}}], until: true, max_iterations: 0}\n"),
		"no max_iterations":     step1("    repeat_until: {steps: [{id: x, fail: {message: m}}], until: true}\n"),
		"concurrency zero":      step1("    for_each: {items: input.xs, concurrency: 0, steps: [{id: x, fail: {message: m}}]}\n"),
		"as reserved":           step1("    for_each: {items: input.xs, as: steps, steps: [{id: x, fail: {message: m}}]}\n"),
		"as capital":            step1("    for_each: {items: input.xs, as: X, steps: [{id: x, fail: {message: m}}]}\n"),
		"items a list":          step1("    for_each: {items: [1], steps: [{id: x, fail: {message: m}}]}\n"),
		"lanes empty":           step1("    parallel: {lanes: {}}\n"),
		"lane name":             step1("    parallel: {lanes: {A: [{id: x, fail: {message: m}}]}}\n"),
		"fail_fast string":      step1("    parallel: {lanes: {a: [{id: x, fail: {message: m}}]}, fail_fast: 'no'}\n"),
		"nested step two kinds": step1("    try: {steps: [{id: x, fail: {message: m}, context_set: {a: 1}}]}\n"),
		"nested bad id":         step1("    try: {steps: [{id: X, fail: {message: m}}]}\n"),
		"construct and kind":    step1("    try: {steps: [{id: x, fail: {message: m}}]}\n    fail: {message: m}\n"),
	} {
		if err := sch.Validate(document(t, src)); err == nil {
			t.Errorf("%s: validates against the schema", name)
		}
		if _, err := Parse("t.yaml", []byte(src), testOpts); err == nil {
			t.Errorf("%s: Parse accepts it", name)
		}
	}
}
