package workflow_test

import (
	"errors"
	"fmt"

	"github.com/starflow/starflow/workflow"
)

func ExampleParse() {
	src := `name: hello
steps:
  - id: greet
    context_set: {greeting: "${{ 'hello ' + input.name }}", ratio: 1.0}
`
	d, err := workflow.Parse("hello.yaml", []byte(src), workflow.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Name, d.Steps[0].Kind(), d.Steps[0].Pos)
	fmt.Println(string(d.Canonical()))
	// Output:
	// hello context_set {3 5}
	// {"name":"hello","steps":[{"id":"greet","context_set":{"greeting":"${{ 'hello ' + input.name }}","ratio":1.0}}]}
}

func ExampleParse_errors() {
	src := `name: Hello
steps:
  - id: a
    run_after: [b]
    fail: {message: "failed: ${{ input. }}"}
  - id: b
    run_after: [a]
    fail: {message: x}
`
	_, err := workflow.Parse("bad.yaml", []byte(src), workflow.ParseOptions{})
	var list workflow.Errors
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Printf("%d:%d %.60s\n", e.Line, e.Column, e.Msg)
		}
	}
	// Output:
	// 1:7 name "Hello" must match [a-z0-9][a-z0-9_-]*
	// 4:17 run_after cycle: a → b → a
	// 5:30 fail.message: expression "input.": 1:7: Syntax error: no via
}

func ExampleDefinition_ValidateInput() {
	src := `name: typed
input_schema:
  type: object
  required: [qty]
  properties: {qty: {type: integer, minimum: 1}}
steps:
  - id: a
    context_set: {qty: "${{ input.qty }}"}
`
	d, err := workflow.Parse("typed.yaml", []byte(src), workflow.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.ValidateInput(map[string]any{"qty": int64(2)}))
	fmt.Println(d.ValidateInput(map[string]any{"qty": 0}))
	// Output:
	// <nil>
	// input does not match input_schema: at /qty: minimum: got 0, want 1
}

func ExampleDefinition_Walk() {
	src := `name: nested
steps:
  - id: fetch
    context_set: {orders: "${{ input.orders }}"}
  - id: ship
    try:
      steps:
        - id: each
          for_each:
            items: variables.orders
            as: order
            concurrency: 4
            steps:
              - id: send
                context_set: {last: "${{ order.id }}"}
      catch:
        - id: report
          context_set: {failure: "${{ error.message }}"}
`
	d, err := workflow.Parse("nested.yaml", []byte(src), workflow.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d.Walk(func(s *workflow.Step, list []*workflow.Step) bool {
		fmt.Println(len(d.Ancestors(s.ID)), s.ID, s.Kind())
		return true
	})
	fmt.Println(d.StepByID("send").Pos)
	// Output:
	// 0 fetch context_set
	// 0 ship try
	// 1 each for_each
	// 2 send context_set
	// 1 report context_set
	// {14 17}
}
