package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
)

// oddFormWF parks on an approval whose form's fields and required list
// are whatever the input holds.
const oddFormWF = `name: oddform
steps:
  - id: ask
    wait:
      approval:
        signal: ok
        form:
          title: Odd
          required: "${{ input.required }}"
          fields: "${{ input.fields }}"
      timeout: 1h
output: "${{ steps.ask.output }}"
`

// TestMalformedApprovalForms: an approval form whose fields are null, a
// number, a string, a list of junk, or named like the form's own
// properties ("elements", "__proto__") or with no name is drawn without
// an exception, with only the fields that make sense, and its submit
// sends every field it drew.
func TestMalformedApprovalForms(t *testing.T) {
	e := newEnv(t)
	e.apply(oddFormWF)
	ctx := browser(t)
	cases := []struct {
		name   string
		fields any
		inputs int // form controls drawn, the button aside
		fill   func(sel string) chromedp.Action[chromedp.Void]
		want   map[string]any // the run's output (the payload sent)
	}{
		{name: "null", fields: nil, want: map[string]any{}},
		{name: "number", fields: 5, want: map[string]any{}},
		{name: "string", fields: "abc", want: map[string]any{}},
		{name: "list of junk", fields: []any{1, nil, "x", map[string]any{"type": "number"}, map[string]any{"name": "ok", "type": "string"}},
			inputs: 1,
			fill: func(sel string) chromedp.Action[chromedp.Void] {
				return chromedp.SendKeys(chromedp.CSS(sel+` input[name="ok"]`), "fine")
			},
			want: map[string]any{"ok": "fine"}},
		{name: "odd names and values", fields: map[string]any{
			"":          "string",
			"elements":  map[string]any{"type": "string"},
			"__proto__": map[string]any{"type": "string", "label": map[string]any{"x": 1}, "description": []any{1, 2}},
			"n":         map[string]any{"type": "integer"},
			"e":         map[string]any{"enum": []any{map[string]any{"a": 1}, nil, 2}},
			"flag":      "boolean",
		},
			inputs: 6, // flag is two radios (yes, no)
			fill: func(sel string) chromedp.Action[chromedp.Void] {
				return chromedp.Steps(chromedp.SendKeys(chromedp.CSS(sel+` input[name="elements"]`), "yes"),
					chromedp.SendKeys(chromedp.CSS(sel+` input[name="__proto__"]`), "p"),
					chromedp.SendKeys(chromedp.CSS(sel+` input[name="n"]`), "3"),
					chromedp.SetValue(chromedp.CSS(sel+` select[name="e"]`), "2"))
			},
			// flag, an optional yes/no left unanswered, is left out.
			want: map[string]any{"elements": "yes", "__proto__": "p", "n": 3.0, "e": 2.0}},
	}
	for _, c := range cases {
		in, _ := json.Marshal(map[string]any{"fields": c.fields, "required": "elements"})
		id := e.enqueue("oddform", string(in))
		e.waitStatus(id, starflowtype.RunPaused)
		run(t, ctx, c.name+": open", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`form[data-wait] button[type="submit"]`)))
		sel := `form[data-wait]`
		if n := count(t, ctx, sel+` input, `+sel+` select, `+sel+` textarea`); n != c.inputs {
			t.Errorf("%s: %d form controls, want %d (%s)", c.name, n, c.inputs, text(t, ctx, sel))
		}
		if c.fill != nil {
			run(t, ctx, c.name+": fill", c.fill(sel))
		}
		run(t, ctx, c.name+": submit", chromedp.Click(chromedp.CSS(sel+` button[type="submit"]`)), chromedp.WaitVisible(css(`main[data-status="succeeded"]`)))
		r := e.waitStatus(id, starflowtype.RunSucceeded)
		var got map[string]any
		if err := json.Unmarshal(r.Output, &got); err != nil {
			t.Fatalf("%s: output %s: %v", c.name, r.Output, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: the form sent %s, want %v", c.name, r.Output, c.want)
		}
	}
}
