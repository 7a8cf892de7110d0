package expr

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
)

// docPath is the reference of the expression language. Its tables of
// examples are tested here: every example must give its result, and
// every function and macro the environment declares must be called by an
// example, so the document cannot drift from the engine.
const docPath = "../../docs/expressions.md"

// docVars are the variables the document's examples may read; the
// document says so above its first table.
var docVars = map[string]any{
	"input": map[string]any{"name": "Ada", "items": []any{int64(3), int64(1), int64(2)}},
}

// docExample is one row of a table whose header ends with `| Example |
// Result |`: the Example cell is one code span of CEL, the Result cell a
// code span of JSON (the value the engine stores: ints without a fraction,
// doubles with one) or `error: ` and a code span the error must contain.
type docExample struct {
	line    int
	src     string
	want    any
	wantErr string // non-empty: the example must fail with this in its error
}

func readDocExamples(t *testing.T) []docExample {
	t.Helper()
	f, err := os.Open(docPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docExample
	sc := bufio.NewScanner(f)
	inTable, width, line := false, 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(text, "|") {
			inTable = false
			continue
		}
		cells := tableCells(text)
		n := len(cells)
		switch {
		case n >= 2 && cells[n-2] == "Example" && cells[n-1] == "Result":
			inTable, width = true, n
			continue
		case !inTable || strings.Trim(text, "|-: ") == "":
			continue
		}
		if n != width {
			t.Fatalf("%s:%d: a row of an example table has %d cells, its header %d", docPath, line, n, width)
		}
		src, ok := codeSpan(cells[n-2])
		if !ok {
			t.Fatalf("%s:%d: the Example cell %q is not one code span", docPath, line, cells[n-2])
		}
		ex := docExample{line: line, src: src}
		if rest, isErr := strings.CutPrefix(cells[n-1], "error: "); isErr {
			if ex.wantErr, ok = codeSpan(rest); !ok || ex.wantErr == "" {
				t.Fatalf("%s:%d: the Result cell %q: want error: `text`", docPath, line, cells[n-1])
			}
		} else {
			j, ok := codeSpan(cells[n-1])
			if !ok {
				t.Fatalf("%s:%d: the Result cell %q is not one code span", docPath, line, cells[n-1])
			}
			if ex.want, err = decodeJSON(j); err != nil {
				t.Fatalf("%s:%d: the Result %q is not JSON: %v", docPath, line, j, err)
			}
		}
		out = append(out, ex)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no example tables", docPath)
	}
	return out
}

// tableCells splits a markdown table row on the pipes that are not
// escaped (`\|` stands for a | inside a cell) and unescapes them.
func tableCells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			b.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

// codeSpan returns the content of s when s is exactly one code span
// (`x`, or “x“ for content with a backtick; one space inside each end
// is dropped, as markdown does).
func codeSpan(s string) (string, bool) {
	n := len(s) - len(strings.TrimLeft(s, "`"))
	if n == 0 || len(s) < 2*n+1 {
		return "", false
	}
	fence := s[:n]
	inner, ok := strings.CutSuffix(s[n:], fence)
	if !ok || strings.Contains(inner, fence) {
		return "", false
	}
	if len(inner) > 1 && inner[0] == ' ' && inner[len(inner)-1] == ' ' {
		inner = inner[1 : len(inner)-1]
	}
	return inner, true
}

// decodeJSON decodes s as the engine reads JSON: numbers without a
// fraction or exponent are int64, others float64.
func decodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one value")
	}
	return numbers(v)
}

func numbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			return x.Int64()
		}
		return x.Float64()
	case []any:
		for i := range x {
			var err error
			if x[i], err = numbers(x[i]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range x {
			var err error
			if x[k], err = numbers(x[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// TestDocExamples evaluates every example of docs/expressions.md with the
// default environment and compares it with its documented result.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	e := Default()
	for _, ex := range readDocExamples(t) {
		got, err := func() (any, error) {
			p, err := e.Compile(ex.src)
			if err != nil {
				return nil, err
			}
			return e.Eval(context.Background(), p, docVars)
		}()
		where := fmt.Sprintf("%s:%d: %s", docPath, ex.line, ex.src)
		switch {
		case ex.wantErr != "" && err == nil:
			t.Errorf("%s\n\tgives %s, documented to fail with %q", where, jsonOf(got), ex.wantErr)
		case ex.wantErr != "" && !strings.Contains(err.Error(), ex.wantErr):
			t.Errorf("%s\n\tfails with %q, documented to fail with %q", where, err, ex.wantErr)
		case ex.wantErr == "" && err != nil:
			t.Errorf("%s\n\tfails: %v; documented result %s", where, err, jsonOf(ex.want))
		case ex.wantErr == "" && !reflect.DeepEqual(got, ex.want):
			t.Errorf("%s\n\tgives %s (%T), documented result %s (%T)", where, jsonOf(got), got, jsonOf(ex.want), ex.want)
		}
	}
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	if _, ok := v.(float64); ok && !strings.ContainsAny(string(b), ".eE") {
		return string(b) + ".0"
	}
	return string(b)
}

// undocumented are the functions the environment declares that no
// example can call, each with its reason; TestDocListsEveryFunction
// checks that they still exist, so the list shrinks with cel-go.
var undocumented = map[string]string{
	// Older spellings of the `in` operator; the parser writes @in, which
	// the operator examples call.
	"in":   "legacy name of @in",
	"_in_": "legacy name of @in",
	// Older spelling of @not_strictly_false (used by the macros).
	"__not_strictly_false__": "legacy name of @not_strictly_false",
	// Only cel-go's common-subexpression optimizer writes cel.@block; the
	// parser never does, and no expression can name it.
	"cel.@block": "written by an optimizer Starflow does not run",
}

// TestDocListsEveryFunction fails when the environment declares a
// function, a form (overload) of a function, or a macro that no example
// of docs/expressions.md calls: a cel-go upgrade or a library's new
// version that adds one makes this fail until the document shows it.
//
// Every function must be called; every overload of a named function
// too (`l.reverse()` and `s.reverse()` are two), counted when the checker
// resolved a call to that overload alone. Operators (`_+_`, `!_`, …) need
// one example each, not one per operand type: the operator table states
// the types. Functions with @ in their names (@in, math.@max, …) are what
// operators and macros compile to; the examples of those call them.
func TestDocListsEveryFunction(t *testing.T) {
	t.Parallel()
	analysis, err := Default().env.Extend(cel.EnableMacroCallTracking())
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	resolved := map[string]bool{} // overload ids
	macros := map[string]bool{}   // name/argument count
	for _, ex := range readDocExamples(t) {
		ast, iss := analysis.Compile(ex.src)
		if iss.Err() != nil {
			if ex.wantErr == "" {
				t.Errorf("%s:%d: %s: %v", docPath, ex.line, ex.src, iss.Err())
			}
			continue
		}
		native := ast.NativeRep()
		for _, r := range native.ReferenceMap() {
			if len(r.OverloadIDs) == 1 {
				resolved[r.OverloadIDs[0]] = true
			}
		}
		celast.PostOrderVisit(native.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
			if x.Kind() == celast.CallKind {
				called[x.AsCall().FunctionName()] = true
			}
		}))
		for _, m := range native.SourceInfo().MacroCalls() {
			if m.Kind() == celast.CallKind {
				macros[fmt.Sprintf("%s/%d", m.AsCall().FunctionName(), len(m.AsCall().Args()))] = true
			}
		}
	}
	declared := analysis.Functions()
	var missing []string
	for name := range declared {
		if _, ok := undocumented[name]; ok {
			continue
		}
		if !called[name] {
			missing = append(missing, name)
			continue
		}
		if strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") || strings.Contains(name, "@") {
			continue // an operator, or what one compiles to
		}
		for _, o := range declared[name].OverloadDecls() {
			if !resolved[o.ID()] {
				missing = append(missing, fmt.Sprintf("%s (overload %s)", name, o.ID()))
			}
		}
	}
	for _, m := range analysis.Macros() {
		key := fmt.Sprintf("%s/%d", m.Function(), m.ArgCount())
		if strings.Contains(m.MacroKey(), ":*:") { // a macro of any number of arguments
			if !slices.ContainsFunc(mapKeys(macros), func(k string) bool { return strings.HasPrefix(k, m.Function()+"/") }) {
				missing = append(missing, "macro "+m.Function()+"(…)")
			}
			continue
		}
		if !macros[key] {
			missing = append(missing, "macro "+key)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s has no example calling: %s", docPath, strings.Join(missing, ", "))
	}
	for name := range undocumented {
		if _, ok := declared[name]; !ok {
			t.Errorf("undocumented lists %q, which the environment no longer declares: remove it", name)
		}
	}
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
