package workflow

import "strings"

// Definitions with control-flow constructs. init adds them to validDefs
// and invalidCases, so the schema test, the round trip and the fuzz seeds
// cover them.

var constructDefs = map[string]string{
	// Every construct, nested: a for_each inside a parallel lane inside a
	// try, a for_each inside a repeat_until.
	"constructs.yaml": `name: constructs
secrets: [TOKEN]
steps:
  - id: load
    context_set: {orders: "${{ input.orders }}", attempts: 0}
  - id: ship
    timeout: 5m
    try:
      steps:
        - id: fanout
          parallel:
            fail_fast: false
            lanes:
              email:
                - id: per-order
                  for_each:
                    items: variables.orders
                    as: order
                    concurrency: 4
                    steps:
                      - id: send
                        when: "${{ order.email != '' }}"
                        service_call:
                          method: POST
                          url: https://mail.example.com/send
                          body: {to: "${{ order.email }}", n: "${{ order.n }}", ratio: 2.0}
                      - id: mark
                        context_set: {last_sent: "order ${{ order.id }} of ${{ size(variables.orders) }}"}
              audit:
                - id: log
                  service_call: {url: "https://audit.example.com/log"}
                - id: count
                  run_after: []
                  context_set: {audited: true}
                - id: after-both
                  run_after: [log, count]
                  notify: {channel: audit}
      catch:
        - id: report
          context_set: {failure: "${{ error.message }}", failed_step: "${{ error.step_id }}"}
      finally:
        - id: cleanup
          notify: {channel: ops, text: "done with ${{ size(variables.orders) }} orders"}
  - id: poll
    run_after: [load]
    repeat_until:
      until: "${{ steps.check.output.body.ready == true }}"
      max_iterations: 10
      steps:
        - id: check
          service_call: {url: "https://status.example.com/ready"}
        - id: touch-all
          for_each:
            items: "${{ steps.check.output.body.pending }}"
            steps:
              - id: touch
                service_call: {method: PUT, url: "https://status.example.com/touch/${{ item }}"}
  - id: decide
    when: input.enabled
    if:
      condition: size(variables.orders) > 0
      then:
        - id: done
          context_set: {status: shipped}
      else:
        - id: nothing
          fail: {message: no orders}
output: "${{ steps.decide.output }}"
`,

	// The smallest form of each construct, and several DAG roots.
	"small-constructs.yaml": `name: small
steps:
  - id: a
    run_after: []
    context_set: {x: 1}
  - id: b
    run_after: []
    context_set: {y: 2}
  - id: gate
    run_after: [a, b]
    if: {condition: true, then: [{id: t, fail: {message: x}}]}
  - id: guard
    try: {steps: [{id: inner, context_set: {z: 3}}]}
  - id: loop
    repeat_until: {steps: [{id: body, context_set: {n: 1}}], until: false, max_iterations: 1}
  - id: each
    for_each: {items: "[1, 2]", steps: [{id: one, context_set: {v: "${{ item }}"}}]}
  - id: lanes
    parallel: {lanes: {only: [{id: solo, charge_card: {amount: 1}}]}}
`,

	// The same as small-constructs.yaml with every default written out.
	"explicit-defaults.yaml": `name: small
steps:
  - id: a
    run_after: []
    context_set: {x: 1}
  - id: b
    run_after: []
    context_set: {y: 2}
  - id: gate
    run_after: [a, b]
    if: {condition: true, then: [{id: t, fail: {message: x}}]}
  - id: guard
    try: {steps: [{id: inner, context_set: {z: 3}}]}
  - id: loop
    repeat_until: {steps: [{id: body, context_set: {n: 1}}], until: false, max_iterations: 1}
  - id: each
    for_each: {items: "[1, 2]", as: item, concurrency: 1, steps: [{id: one, context_set: {v: "${{ item }}"}}]}
  - id: lanes
    parallel: {lanes: {only: [{id: solo, charge_card: {amount: 1}}]}, fail_fast: true}
`,

	// JSON, nested for_each loops with their own names.
	"nested-loops.json": `{
	"name": "nested-loops",
	"steps": [
		{"id": "outer", "for_each": {"items": "input.groups", "as": "group", "steps": [
			{"id": "inner", "for_each": {"items": "${{ group.members }}", "as": "m", "concurrency": 2, "steps": [
				{"id": "greet", "context_set": {"last": "${{ group.name + '/' + m }}"}, "when": "m != '' && group.name != ''"}
			]}},
			{"id": "after", "run_after": [], "context_set": {"g": "${{ group }}"}}
		]}}
	]
}
`,
}

// nest returns a definition whose step sits inside depth try constructs.
func nest(depth int) string {
	var b strings.Builder
	b.WriteString("name: deep\nsteps:\n")
	indent := "  "
	for i := range depth {
		b.WriteString(indent + "- id: t" + strings.Repeat("x", i) + "\n")
		b.WriteString(indent + "  try:\n")
		b.WriteString(indent + "    steps:\n")
		indent += "      "
	}
	b.WriteString(indent + "- id: leaf\n" + indent + "  fail: {message: x}\n")
	return b.String()
}

// step1 wraps the body of one step (lines indented by 4) into a definition:
// the step's own lines start at line 3.
func step1(body string) string { return "name: a\nsteps:\n  - id: s\n" + body }

var constructInvalid = []invalidCase{
	{"if missing then", step1("    if: {condition: true}\n"), "t.yaml:4:5: ", `if is missing "then"`},
	{"if missing condition", step1("    if:\n      then: [{id: x, fail: {message: m}}]\n"), "t.yaml:4:5: ", `if is missing "condition"`},
	{"if then empty", step1("    if: {condition: true, then: []}\n"), "t.yaml:4:33: ", "if.then must not be empty"},
	{"if else empty", step1("    if:\n      condition: true\n      then: [{id: x, fail: {message: m}}]\n      else: []\n"), "t.yaml:7:13: ", "if.else must not be empty"},
	{"if condition does not compile", step1("    if:\n      condition: input.qty >\n      then: [{id: x, fail: {message: m}}]\n"), "t.yaml:5:18: ", `if.condition: expression "input.qty >"`},
	{"if condition a number", step1("    if:\n      condition: 1\n      then: [{id: x, fail: {message: m}}]\n"), "t.yaml:5:18: ", "if.condition must be a boolean or an expression, not an integer"},
	{"if unknown field", step1("    if:\n      condition: true\n      then: [{id: x, fail: {message: m}}]\n      otherwise: [{id: y, fail: {message: m}}]\n"), "t.yaml:7:7: ", `unknown field "otherwise" in if; allowed: condition, then, else`},
	{"if not a mapping", step1("    if: [1]\n"), "t.yaml:4:9: ", "if must be a mapping, not a list"},
	{"try catch null", step1("    try:\n      steps: [{id: x, fail: {message: m}}]\n      catch: null\n"), "t.yaml:6:14: ", "try.catch must be a list, not null"},
	{"try finally empty", step1("    try:\n      steps: [{id: x, fail: {message: m}}]\n      finally: []\n"), "t.yaml:6:16: ", "try.finally must not be empty"},
	{"try missing steps", step1("    try: {catch: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:5: ", `try is missing "steps"`},
	{"try unknown field", step1("    try: {steps: [{id: x, fail: {message: m}}], cach: [{id: y, fail: {message: m}}]}\n"), "t.yaml:4:49: ", `unknown field "cach" in try (did you mean "catch"?); allowed: steps, catch, finally`},
	{"repeat_until missing max_iterations", step1("    repeat_until:\n      steps: [{id: x, context_set: {n: 1}}]\n      until: true\n"), "t.yaml:4:5: ", `repeat_until is missing "max_iterations"`},
	{"repeat_until max_iterations zero", step1("    repeat_until:\n      steps: [{id: x, context_set: {n: 1}}]\n      until: true\n      max_iterations: 0\n"), "t.yaml:7:23: ", "repeat_until.max_iterations must be at least 1"},
	{"repeat_until until interpolated", step1("    repeat_until:\n      steps: [{id: x, context_set: {n: 1}}]\n      until: \"done: ${{ true }}\"\n      max_iterations: 3\n"), "t.yaml:6:14: ", "repeat_until.until must be one expression"},
	{"repeat_until steps empty", step1("    repeat_until: {steps: [], until: true, max_iterations: 1}\n"), "t.yaml:4:27: ", "repeat_until.steps must not be empty"},
	{"for_each unknown field", step1("    for_each:\n      items: input.xs\n      stpes: [{id: x, fail: {message: m}}]\n"), "t.yaml:6:7: ", `unknown field "stpes" in for_each (did you mean "steps"?); allowed: items, as, index_as, concurrency, steps`},
	{"for_each missing items", step1("    for_each: {steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:5: ", `for_each is missing "items"`},
	{"for_each items a list", step1("    for_each: {items: [1, 2], steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:23: ", "for_each.items must be an expression, not a list"},
	{"for_each concurrency zero", step1("    for_each: {items: input.xs, concurrency: 0, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:46: ", "for_each.concurrency must be at least 1"},
	{"for_each as not an identifier", step1("    for_each: {items: input.xs, as: Order, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:37: ", `for_each.as "Order" must match [a-z_][a-z0-9_]*`},
	{"for_each as with a dash", step1("    for_each: {items: input.xs, as: my-item, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:37: ", `for_each.as "my-item" must match`},
	{"for_each as reserved", step1("    for_each: {items: input.xs, as: input, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:37: ", `for_each.as "input" is a reserved name (input, variables, steps, error, env, secrets, run, output)`},
	{"for_each as CEL word", step1("    for_each: {items: input.xs, as: in, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:37: ", `for_each.as "in" is a reserved word or type name of the expression language`},
	{"for_each as type name", step1("    for_each: {items: input.xs, as: int, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:37: ", `for_each.as "int" is a reserved word or type name of the expression language`},
	{"loop variable with another error", step1("    for_each:\n      as: order\n      items: input.xs\n      steps:\n        - id: x\n          when: order.n > nosuch()\n          fail: {message: m}\n"), "t.yaml:9:17: ", `when: expression "order.n > nosuch()": 1:17: undeclared reference to 'nosuch' | order.n > nosuch()`},
	{"loop variable out of scope", step1("    for_each: {as: order, items: input.xs, steps: [{id: x, fail: {message: m}}]}\n  - id: y\n    context_set: {v: \"${{ order.n }}\"}\n"), "t.yaml:6:23: ", `context_set.v: expression "order.n": 1:1: undeclared reference to 'order'`},
	{"loop variable in its own items", step1("    for_each: {as: order, items: order.xs, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:34: ", "undeclared reference to 'order'"},
	{"parallel lanes empty", step1("    parallel: {lanes: {}}\n"), "t.yaml:4:23: ", "parallel.lanes must name at least one lane"},
	{"parallel lanes a list", step1("    parallel: {lanes: [a]}\n"), "t.yaml:4:23: ", "parallel.lanes must be a mapping of lane names to steps, not a list"},
	{"parallel lane name", step1("    parallel:\n      lanes:\n        Fast: [{id: x, fail: {message: m}}]\n"), "t.yaml:6:9: ", `lane name "Fast" must match [a-z0-9][a-z0-9_-]*`},
	{"parallel lane empty", step1("    parallel:\n      lanes:\n        fast: []\n"), "t.yaml:6:15: ", "parallel.lanes.fast must not be empty"},
	{"parallel fail_fast string", step1("    parallel: {lanes: {a: [{id: x, fail: {message: m}}]}, fail_fast: \"yes\"}\n"), "t.yaml:4:70: ", "parallel.fail_fast must be a boolean, not a string"},
	{"parallel missing lanes", step1("    parallel: {fail_fast: true}\n"), "t.yaml:4:5: ", `parallel is missing "lanes"`},
	{"construct and another kind", step1("    try: {steps: [{id: x, fail: {message: m}}]}\n    context_set: {a: 1}\n"), "t.yaml:5:5: ", `step "s" has more than one kind: try (line 4) and context_set`},
	{"duplicate id nested", step1("    try:\n      steps:\n        - id: s\n          fail: {message: m}\n"), "t.yaml:6:15: ", `duplicate step id "s" (first defined at line 3)`},
	{"duplicate id across lanes", step1("    parallel:\n      lanes:\n        a: [{id: x, fail: {message: m}}]\n        b: [{id: x, fail: {message: m}}]\n"), "t.yaml:7:18: ", `duplicate step id "x" (first defined at line 6)`},
	{"duplicate id nested first", "name: a\nsteps:\n  - try:\n      steps: [{id: x, fail: {message: m}}]\n    id: s\n  - id: x\n    fail: {message: m}\n", "t.yaml:6:9: ", `duplicate step id "x" (first defined at line 4)`},
	{"run_after into a nested list", step1("    try: {steps: [{id: inner, fail: {message: m}}]}\n  - id: b\n    run_after: [inner]\n    fail: {message: m}\n"), "t.yaml:6:17: ", `run_after: step "inner" is in the try list of step "s", not in this steps list (the top-level steps); run_after names steps of the same list only`},
	{"run_after out of a nested list", step1("    fail: {message: m}\n  - id: t\n    if:\n      condition: true\n      then:\n        - id: x\n          run_after: [s]\n          fail: {message: m}\n"), "t.yaml:10:23: ", `run_after: step "s" is in the top-level steps, not in this steps list (the then list of step "t")`},
	{"run_after across lanes", step1("    parallel:\n      lanes:\n        a: [{id: x, fail: {message: m}}]\n        b: [{id: y, run_after: [x], fail: {message: m}}]\n"), "t.yaml:7:33: ", `run_after: step "x" is in lane "a" of step "s", not in this steps list (lane "b" of step "s")`},
	{"run_after unknown nested", step1("    for_each:\n      items: input.xs\n      steps:\n        - id: x\n          run_after: [nope]\n          fail: {message: m}\n"), "t.yaml:8:23: ", `run_after: no step "nope" in this steps list`},
	{"run_after cycle nested", step1("    try:\n      steps:\n        - id: x\n          run_after: [y]\n          fail: {message: m}\n        - id: y\n          run_after: [x]\n          fail: {message: m}\n"), "t.yaml:7:23: ", "run_after cycle: x → y → x"},
	{"run_after self nested", step1("    try:\n      steps:\n        - id: x\n          run_after: [x]\n          fail: {message: m}\n"), "t.yaml:7:23: ", `step "x" cannot run after itself`},
	{"nested step without kind", step1("    try: {steps: [{id: x}]}\n"), "t.yaml:4:19: ", `step "x" has no kind`},
	{"constructs too deep", nest(MaxConstructDepth + 1), "t.yaml:100:197: ", "control flow nests more than 32 constructs deep"},
}

func init() {
	for name, src := range constructDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, constructInvalid...)
}
