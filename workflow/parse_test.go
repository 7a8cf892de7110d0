package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/expr"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	for name, src := range validDefs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := Parse(name, []byte(src), testOpts)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d.Source != name {
				t.Errorf("Source = %q", d.Source)
			}
			for _, s := range d.Steps {
				if s.Pos.Line == 0 || s.Pos.Column == 0 {
					t.Errorf("step %s: no position", s.ID)
				}
				if s.Kind() == "" {
					t.Errorf("step %s: no kind", s.ID)
				}
			}
		})
	}
}

func TestParseFull(t *testing.T) {
	t.Parallel()
	d, err := Parse("full.yaml", []byte(validDefs["full.yaml"]), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	want := &Definition{
		Name:         "order-fulfilment",
		RecoveryMode: "resume",
		RunnerPool:   "payments",
		MaxAttempts:  5,
		InputSchema: map[string]any{
			"type":     "object",
			"required": []any{"sku", "qty"},
			"properties": map[string]any{
				"sku":   map[string]any{"type": "string", "minLength": int64(1)},
				"qty":   map[string]any{"type": "integer", "minimum": int64(1)},
				"email": map[string]any{"type": "string", "format": "email"},
			},
		},
		Secrets: []string{"PAYMENT_TOKEN", "_other2"},
		Defaults: &Defaults{
			Timeout:     Duration(30 * time.Second),
			RetryPolicy: &RetryPolicy{MaxAttempts: 3, InitialInterval: Duration(time.Second), Backoff: 2, MaxInterval: Duration(time.Minute)},
		},
		Steps: []*Step{
			{
				ID:          "reserve",
				Timeout:     Duration(10 * time.Second),
				RetryPolicy: &RetryPolicy{MaxAttempts: 5, InitialInterval: Duration(500 * time.Millisecond), Backoff: 1.5, MaxInterval: Duration(30 * time.Second)},
				ServiceCall: &ServiceCall{
					Method:       "POST",
					URL:          "${{ env.INVENTORY_URL + '/reserve' }}",
					Headers:      map[string]any{"Authorization": "${{ 'Bearer ' + secrets.PAYMENT_TOKEN }}", "X-Count": int64(3)},
					Query:        map[string]any{"dry_run": false, "tag": "a-${{ input.sku }}"},
					Body:         map[string]any{"sku": "${{ input.sku }}", "qty": "${{ input.qty }}", "ratio": 1.0, "list": []any{int64(1), 2.5, "x"}},
					ExpectStatus: []int{200, 201},
				},
				Output: "${{ output.body }}",
				Pos:    Pos{18, 5},
			},
			{
				ID:         "remember",
				ContextSet: map[string]any{"reservation": "${{ steps.reserve.output.id }}", "note": "plain text", "nothing": nil},
				Pos:        Pos{33, 5},
			},
			{
				ID:          "check",
				When:        "steps.reserve.output.id != ''",
				RunAfter:    []string{"remember"},
				ServiceCall: &ServiceCall{URL: "https://example.com/check?sku=${{ input.sku }}"},
				Pos:         Pos{38, 5},
			},
			{
				ID:          "audit",
				RunAfter:    []string{"reserve"},
				When:        true,
				ServiceCall: &ServiceCall{Method: "GET", URL: "https://audit.example.com/log"},
				Pos:         Pos{42, 5},
			},
			{
				ID:       "notify-ops",
				RunAfter: []string{"check", "audit"},
				Custom:   &Custom{Type: "notify", Input: map[string]any{"channel": "ops", "text": "reserved ${{ input.sku }}"}},
				Pos:      Pos{46, 5},
			},
			{
				ID:   "give-up",
				When: "${{ input.qty > 100 }}",
				Fail: &Fail{Message: "too many: ${{ input.qty }}"},
				Pos:  Pos{49, 5},
			},
		},
		Output: map[string]any{
			"reservation": "${{ variables.reservation }}",
			"checked":     "${{ has(steps.check.output) }}",
		},
		Source: "full.yaml",
	}
	if !defsEqual(d, want, true) {
		got, _ := json.MarshalIndent(d, "", "  ")
		t.Fatalf("got\n%s", got)
	}
	if d.Steps[4].Kind() != "notify" {
		t.Errorf("Kind = %q", d.Steps[4].Kind())
	}
}

// defsEqual compares definitions field by field; withPos also compares
// step positions and Source.
func defsEqual(a, b *Definition, withPos bool) bool {
	ca, cb := *a, *b
	ca.inputSchema, cb.inputSchema = nil, nil
	if !withPos {
		ca.Source, cb.Source = "", ""
	}
	ca.Steps, cb.Steps = nil, nil
	ca.Schedules, cb.Schedules = plainSchedules(a.Schedules, withPos), plainSchedules(b.Schedules, withPos)
	return reflect.DeepEqual(ca, cb) && stepsEqual(a.Steps, b.Steps, withPos)
}

// plainSchedules copies schedules without their parsed cron (and, unless
// withPos, their positions).
func plainSchedules(in []*Schedule, withPos bool) []*Schedule {
	var out []*Schedule
	for _, s := range in {
		c := *s
		c.cron = nil
		if !withPos {
			c.Pos = Pos{}
		}
		out = append(out, &c)
	}
	return out
}

// stepsEqual compares steps lists, nested ones included.
func stepsEqual(a, b []*Step, withPos bool) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(shallow(a[i], withPos), shallow(b[i], withPos)) {
			return false
		}
		ca, cb := a[i].Children(), b[i].Children()
		if len(ca) != len(cb) {
			return false
		}
		for j := range ca {
			if !stepsEqual(ca[j], cb[j], withPos) {
				return false
			}
		}
	}
	return true
}

// shallow copies s without its nested steps lists (lane names are kept).
func shallow(s *Step, withPos bool) Step {
	c := *s
	if !withPos {
		c.Pos = Pos{}
	}
	if s.If != nil {
		x := *s.If
		x.Then, x.Else = nil, nil
		c.If = &x
	}
	if s.Try != nil {
		c.Try = &Try{CatchWhen: s.Try.CatchWhen}
	}
	if s.Switch != nil {
		x := Switch{}
		for _, k := range s.Switch.Cases {
			x.Cases = append(x.Cases, &SwitchCase{When: k.When})
		}
		c.Switch = &x
	}
	if s.RepeatUntil != nil {
		x := *s.RepeatUntil
		x.Steps = nil
		c.RepeatUntil = &x
	}
	if s.ForEach != nil {
		x := *s.ForEach
		x.Steps = nil
		c.ForEach = &x
	}
	if s.Parallel != nil {
		x := *s.Parallel
		x.Lanes = map[string][]*Step{}
		for name := range s.Parallel.Lanes {
			x.Lanes[name] = nil
		}
		c.Parallel = &x
	}
	return c
}

func TestParseNumbers(t *testing.T) {
	t.Parallel()
	d, err := Parse("numbers.yaml", []byte(validDefs["numbers.yaml"]), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	cs := d.Steps[0].ContextSet
	want := map[string]any{
		"i": int64(1), "f": 1.0, "e": 1000.0, "big": int64(9007199254740993), "neg": 0.0,
		"hex": int64(31), "tiny": 1.5e-300, "huge": 1e300, "s": "1", "t": "2001-12-14", "str": nil,
	}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("context_set = %#v", cs)
	}
	canon := string(d.Canonical())
	for _, frag := range []string{`"big":9007199254740993`, `"f":1.0`, `"e":1000.0`, `"i":1,`, `"neg":-0.0`, `[1,1.0,"${{ 1.0 }}"]`} {
		if !strings.Contains(canon, frag) {
			t.Errorf("canonical form lacks %s: %s", frag, canon)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range invalidCases {
		if seen[c.name] {
			t.Fatalf("two cases named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := Parse("t.yaml", []byte(c.src), testOpts)
			if err == nil {
				t.Fatalf("no error; canonical %s", d.Canonical())
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not *Errors: %v", err, err)
			}
			for _, e := range *errs {
				if strings.HasPrefix(e.Error(), c.want) && strings.Contains(e.Msg, c.frag) {
					return
				}
			}
			t.Errorf("want an error starting %q containing %q; got:\n%v", c.want, c.frag, err)
		})
	}
}

func TestErrorsSortedAndAll(t *testing.T) {
	t.Parallel()
	src := "name: Bad\nmax_attempts: 0\nsteps:\n  - id: a\n    run_after: [zz]\n  - id: a\n    fail: {message: '${{ ) }}'}\n"
	_, err := Parse("x.yaml", []byte(src), ParseOptions{})
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v", err)
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"x.yaml:1:7: name",
		"x.yaml:2:15: max_attempts",
		"x.yaml:4:5: step \"a\" has no kind",
		"x.yaml:5:17: run_after: no step \"zz\"",
		"x.yaml:6:9: duplicate step id",
		"x.yaml:7:22: fail.message",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d errors:\n%v", len(lines), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], want[i])
		}
	}
	var list Errors
	if !errors.As(err, &list) || len(list) != len(want) {
		t.Errorf("errors.As(Errors) = %v", list)
	}
	var first *Error
	if !errors.As(err, &first) || first.Line != 1 || first.File != "x.yaml" {
		t.Errorf("errors.As(*Error) = %+v", first)
	}
}

func TestExprErrorCause(t *testing.T) {
	t.Parallel()
	src := "name: a\nsteps:\n  - id: a\n    fail: {message: '${{ nosuch() }}'}\n"
	_, err := Parse("x.yaml", []byte(src), ParseOptions{})
	var se *expr.SyntaxError
	if !errors.As(err, &se) || se.Expr != "nosuch()" {
		t.Fatalf("want an *expr.SyntaxError in %v", err)
	}
}

func TestCostLimit(t *testing.T) {
	t.Parallel()
	env, err := expr.NewEnv(expr.Limits{Cost: 5})
	if err != nil {
		t.Fatal(err)
	}
	src := "name: a\nsteps:\n  - id: a\n    context_set: {x: '${{ [1, 2, 3].map(x, x * 2).map(y, y + 1) }}', y: '${{ 1 }}'}\n"
	_, err = Parse("x.yaml", []byte(src), ParseOptions{Expr: env})
	if !errors.Is(err, expr.ErrTooCostly) {
		t.Fatalf("want ErrTooCostly, got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "x.yaml:4:23: context_set.x: ") || !strings.Contains(err.Error(), "too costly") {
		t.Errorf("got %v", err)
	}
	if _, err := Parse("x.yaml", []byte(src), ParseOptions{}); err != nil {
		t.Errorf("default limits: %v", err)
	}
}

func TestParseFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(path, []byte(validDefs["minimal.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := ParseFile(path, ParseOptions{})
	if err != nil || d.Name != "m" || d.Source != path {
		t.Fatalf("got %+v, %v", d, err)
	}
	if _, err := ParseFile(filepath.Join(t.TempDir(), "none.yaml"), ParseOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestCanonicalYAMLvsJSON: a YAML file and a JSON file with the same
// meaning, another key order, comments and anchors, have one revision.
func TestCanonicalYAMLvsJSON(t *testing.T) {
	t.Parallel()
	yamlSrc := `# comment
name: same
defaults: &d
  timeout: 1m
steps:
  - id: a
    service_call:
      url: https://x.io/a
      body: {n: 1, f: 2.0, s: "${{ input.s }}"}
  - context_set: {k: [1, 2]}
    id: b
    when: "${{ true }}"
output: "${{ steps.b.output }}"
`
	jsonSrc := `{
  "output": "${{ steps.b.output }}",
  "steps": [
    {"service_call": {"body": {"s": "${{ input.s }}", "f": 2.0, "n": 1}, "url": "https:\/\/x.io\/a"}, "id": "a"},
    {"when": "${{ true }}", "id": "b", "context_set": {"k": [1, 2]}}
  ],
  "defaults": {"timeout": "60s"},
  "name": "same"
}`
	y, err := Parse("s.yaml", []byte(yamlSrc), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := Parse("s.json", []byte(jsonSrc), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(y.Canonical(), j.Canonical()) {
		t.Fatalf("canonical forms differ:\n%s\n%s", y.Canonical(), j.Canonical())
	}
	if y.Revision() != j.Revision() || len(y.Revision()) != 64 {
		t.Fatalf("revisions %s %s", y.Revision(), j.Revision())
	}
}

// TestRoundTrip: Parse(Canonical()) gives back an equal definition with
// the same revision, for every valid test definition.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	names := make([]string, 0, len(validDefs))
	for name := range validDefs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d, err := Parse(name, []byte(validDefs[name]), testOpts)
		if err != nil {
			t.Fatal(err)
		}
		canon := d.Canonical()
		d2, err := Parse(name, canon, testOpts)
		if err != nil {
			t.Fatalf("%s: parse canonical: %v\n%s", name, err, canon)
		}
		if !defsEqual(d, d2, false) {
			a, _ := json.Marshal(d)
			b, _ := json.Marshal(d2)
			t.Errorf("%s: round trip differs:\n%s\n%s", name, a, b)
		}
		if d.Revision() != d2.Revision() {
			t.Errorf("%s: revision changed", name)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, canon); err != nil || !bytes.Equal(compact.Bytes(), canon) {
			t.Errorf("%s: canonical form is not compact JSON: %v", name, err)
		}
	}
}

// TestCanonicalSpecialCharacters: strings YAML cannot hold raw survive the
// canonical form.
func TestCanonicalSpecialCharacters(t *testing.T) {
	t.Parallel()
	src := "name: a\nsteps:\n  - id: a\n    context_set: {x: \"\\x7f\\x85\\x9f\\uFEFF\\uFFFE<&>\\0\\u2028\"}\n"
	d, err := Parse("a.yaml", []byte(src), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Parse("a.json", d.Canonical(), ParseOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, d.Canonical())
	}
	if got := d2.Steps[0].ContextSet["x"]; got != "\x7f\u0085\u009f\ufeff\ufffe<&>\x00\u2028" {
		t.Errorf("got %q", got)
	}
}

func TestAnchorsExpanded(t *testing.T) {
	t.Parallel()
	d, err := Parse("anchors.yaml", []byte(validDefs["anchors.yaml"]), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	two := d.Steps[1]
	if two.ID != "two" || two.RetryPolicy == nil || two.RetryPolicy.MaxAttempts != 2 || two.ServiceCall.URL != "https://example.com/y" {
		t.Errorf("merged step = %+v", two)
	}
	if two.ServiceCall.Headers["Accept"] != "application/json" {
		t.Errorf("headers = %v", two.ServiceCall.Headers)
	}
}

func TestJSONPositions(t *testing.T) {
	t.Parallel()
	d, err := Parse("tabs.json", []byte(validDefs["tabs.json"]), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Steps[1].Pos != (Pos{4, 3}) {
		t.Errorf("Pos = %+v", d.Steps[1].Pos)
	}
	cs := d.Steps[0].ContextSet
	if cs["path"] != "a/b" || cs["smile"] != "😀" {
		t.Errorf("context_set = %v", cs)
	}
	if c := d.Steps[1].Custom; c == nil || c.Type != "charge_card" || c.Input != nil {
		t.Errorf("custom = %+v", c)
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"a": true, "0": true, "a-b_c9": true, "": false, "-a": false, "_a": false, "A": false, "a.b": false, "é": false} {
		if ValidID(s) != want {
			t.Errorf("ValidID(%q) = %v", s, !want)
		}
	}
	if !IsStepField("run_after") || IsStepField("service_call") || IsStepField("notify") {
		t.Error("IsStepField")
	}
}

// TestKeyLengthLimit: the longest key accepted reads back from the
// canonical form (YAML reads implicit keys of up to 1024 characters).
func TestKeyLengthLimit(t *testing.T) {
	t.Parallel()
	for _, key := range []string{strings.Repeat("k", MaxKeyLength-2), strings.Repeat("&", (MaxKeyLength-2)/6)} {
		src := "name: a\noutput:\n  \"" + key + "\": 1\n" + okSteps
		d, err := Parse("k.yaml", []byte(src), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse("k.json", d.Canonical(), ParseOptions{}); err != nil {
			t.Fatalf("canonical form: %v", err)
		}
	}
}
