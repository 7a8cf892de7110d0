package expr

import (
	"reflect"
	"testing"
)

func TestRefs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		want []Ref
	}{
		{"input.qty > 1", []Ref{{Var: "input", Path: []string{"qty"}}}},
		{"steps.a.output.body", []Ref{{Var: "steps", Path: []string{"a", "output", "body"}}}},
		{"steps['a'].output", []Ref{{Var: "steps", Path: []string{"a", "output"}}}},
		{"has(steps.a.output)", []Ref{{Var: "steps", Path: []string{"a", "output"}, Offset: 4}}},
		{"steps[input.k].output", []Ref{{Var: "steps", Path: []string{}}, {Var: "input", Path: []string{"k"}, Offset: 6}}},
		{"steps.?a.orValue(1)", []Ref{{Var: "steps", Path: []string{"a"}}}},
		{"[1, 2].map(item, item * 2)", nil},
		{"[1, 2].map(x, x + item)", []Ref{{Var: "item", Path: []string{}, Offset: 18}}},
		{"item.id + error.message", []Ref{{Var: "item", Path: []string{"id"}}, {Var: "error", Path: []string{"message"}, Offset: 10}}},
		{"{'k': variables.v}[steps.b.status]", []Ref{{Var: "variables", Path: []string{"v"}, Offset: 6}, {Var: "steps", Path: []string{"b", "status"}, Offset: 19}}},
		{"'é' + steps.a.status", []Ref{{Var: "steps", Path: []string{"a", "status"}, Offset: 6}}},
		{"size(steps)", []Ref{{Var: "steps", Path: []string{}, Offset: 5}}},
		{"input.exists(steps, steps > 1) || steps.x.status == ''", []Ref{{Var: "input"}, {Var: "steps", Path: []string{"x", "status"}, Offset: 34}}},
		// cel.bind and the two-variable macros bind names too.
		{"cel.bind(item, input.a, item + steps.b.output)", []Ref{{Var: "input", Path: []string{"a"}, Offset: 15}, {Var: "steps", Path: []string{"b", "output"}, Offset: 31}}},
		{"{'a': 1}.all(k, item, item > input.n)", []Ref{{Var: "input", Path: []string{"n"}, Offset: 29}}},
		{"[1].transformMapEntry(index, v, {string(index): v + item})", []Ref{{Var: "item", Path: []string{}, Offset: 52}}},
	}
	for _, c := range cases {
		got, err := Default().Refs(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		for i := range got {
			if got[i].Path == nil {
				got[i].Path = []string{}
			}
		}
		for i := range c.want {
			if c.want[i].Path == nil {
				c.want[i].Path = []string{}
			}
		}
		if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.src, got, c.want)
		}
	}
	if _, err := Default().Refs("1 +"); err == nil {
		t.Error("a syntax error parses")
	}
}

func TestSpans(t *testing.T) {
	t.Parallel()
	got := Spans("a ${{ steps.x }} b ${{'}}'}}${{ )")
	want := []Span{{Src: "steps.x", Offset: 6}, {Src: "'}}'", Offset: 22}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
