package expr

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestTemplates(t *testing.T) {
	e := Default()
	vars := map[string]any{
		"input":     map[string]any{"sku": "A1", "qty": int64(2), "price": 2.5},
		"variables": map[string]any{},
		"steps":     map[string]any{"a": map[string]any{"output": map[string]any{"id": "x"}}},
	}
	cases := []struct {
		in   any
		want any
	}{
		{"plain", "plain"},
		{"${{ input.qty }}", int64(2)},
		{"${{ input.qty * 2 }}", int64(4)},
		{"${{ input.price }}", 2.5},
		{" ${{ input.qty }}", " 2"},
		{"n=${{ input.qty }} sku=${{ input.sku }}", "n=2 sku=A1"},
		{"${{ {'a': {'b': 1}} }}", map[string]any{"a": map[string]any{"b": int64(1)}}},
		{"${{ has(steps.a.output) }}", true},
		{"${{ has(steps.b) }}", false},
		{"${{ [1, 2] }}x", "[1,2]x"},
		{map[string]any{"k": "${{ input.sku + '-' + steps.a.output.id }}", "n": int64(1)}, map[string]any{"k": "A1-x", "n": int64(1)}},
		{[]any{"${{ 1 }}", "a"}, []any{int64(1), "a"}},
		{"${{ '}}' }}", "}}"},
		{"${{ base64.encode(b'hi') }}", "aGk="},
	}
	for _, c := range cases {
		tpl, err := e.ParseTemplate(c.in)
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		got, err := e.EvalTemplate(context.Background(), tpl, vars)
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %#v want %#v", c.in, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	e := Default()
	for _, s := range []string{"${{ input. }}", "${{ 1 +", "x ${{ }}", "${{ nosuchfn(1) }}"} {
		if _, err := e.ParseTemplate(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
	_, err := e.ParseTemplate("ab ${{ 1 + }}")
	se, ok := err.(*SyntaxError)
	if !ok || se.Offset != 3 {
		t.Fatalf("want SyntaxError at offset 3, got %#v", err)
	}
}

func TestCostLimit(t *testing.T) {
	e, err := NewEnv(Limits{Cost: 1000})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := e.ParseTemplate("${{ input.list.map(x, input.list.map(y, x * y)) }}")
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, 200)
	for i := range list {
		list[i] = int64(i)
	}
	_, err = e.EvalTemplate(context.Background(), tpl, map[string]any{"input": map[string]any{"list": list}})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("want cost limit error, got %v", err)
	}
}

func TestParseExprBare(t *testing.T) {
	e := Default()
	tpl, err := e.ParseExpr("input.qty > 1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.EvalTemplate(context.Background(), tpl, map[string]any{"input": map[string]any{"qty": int64(2)}})
	if err != nil || v != true {
		t.Fatalf("got %v %v", v, err)
	}
}
