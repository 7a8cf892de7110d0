package workflow

// Definitions for the names-in-scope check (scope.go) and the caps of
// Limits, added to validDefs and invalidCases, so the schema test, the
// round trip and the fuzz seeds cover them too.

var scopeDefs = map[string]string{
	// Every place a name is in scope.
	"scope.yaml": `name: scope
steps:
  - id: load
    context_set: {orders: "${{ input.orders }}"}
  - id: doubled
    # a comprehension binds item, error and steps of its own
    context_set:
      d: "${{ variables.orders.map(item, item * 2) }}"
      e: "${{ [1].exists(error, error > 0) }}"
      f: "${{ [1].all(steps, steps > 0) }}"
  - id: dynamic
    context_set: {pick: "${{ steps[input.which].status }}"}
  - id: guard
    try:
      steps:
        - id: risky
          service_call: {url: "https://example.com/x?o=${{ steps.load.output.orders }}"}
        - id: after-risky
          context_set: {ok: "${{ steps.risky.output.status }}"}
      catch:
        - id: report
          when: "!has(steps.risky.output)"
          context_set: {failure: "${{ error.message }}", where: "${{ error.step_id }}"}
        - id: each-failure
          for_each:
            items: "[1, 2]"
            steps:
              - id: log
                context_set: {line: "${{ error.message + string(item) }}"}
      finally:
        - id: cleanup
          context_set: {reported: "${{ has(steps.report.output) || has(steps['after-risky'].output) }}"}
  - id: ship
    for_each:
      items: variables.orders
      as: order
      steps:
        - id: price
          context_set: {p: "${{ order.n * 2 }}"}
          output: "${{ output.p + size(steps.load.output) }}"
        - id: lines
          for_each:
            items: "${{ order.lines }}"
            steps:
              - id: line
                context_set: {l: "${{ order.n + item + steps.price.output }}"}
  - id: poll
    repeat_until:
      steps:
        - id: check
          context_set: {n: "${{ steps.ship.output }}"}
      until: "${{ steps.check.output.n != null }}"
      max_iterations: 3
  - id: dag_a
    run_after: []
    context_set: {a: 1}
  - id: dag_b
    run_after: [dag_c]
    context_set: {b: "${{ steps.dag_c.output.c + steps.dag_a.output.a }}"}
  - id: dag_c
    run_after: [dag_a]
    context_set: {c: "${{ steps.dag_a.output.a }}"}
  - id: branches
    run_after: [dag_b]
    if:
      condition: "${{ steps.dag_b.output.b > 0 }}"
      then:
        - id: yes
          context_set: {branch: "${{ steps.dag_a.status }}"}
      else:
        - id: no
          context_set: {branch: no}
output: "${{ {'ship': steps.ship.output, 'poll': steps.poll.output, 'b': steps.branches.output} }}"
`,
	// The caps at their defaults exactly.
	"at-limits.yaml": `name: at-limits
steps:
  - id: many
    for_each: {items: "[1]", concurrency: 64, steps: [{id: one, context_set: {x: 1}}]}
  - id: loop
    repeat_until: {steps: [{id: body, context_set: {n: 1}}], until: true, max_iterations: 10000}
`,
}

var scopeInvalid = []invalidCase{
	{"steps unknown", step1("    context_set: {x: \"${{ steps.nope.output }}\"}\n"), "t.yaml:4:27: ", `context_set.x: steps.nope: no step "nope" in the definition`},
	{"steps unknown suggested", step1("    context_set: {x: 1}\n  - id: load\n    context_set: {x: 1}\n  - id: t\n    when: steps.lod.status == ''\n    fail: {message: m}\n"), "t.yaml:8:11: ", `when: steps.lod: no step "lod" in the definition (did you mean "load"?)`},
	{"steps later in the list", step1("    context_set: {x: \"a ${{ 1 + steps.t.output.y }}\"}\n  - id: t\n    context_set: {y: 1}\n"), "t.yaml:4:33: ", `steps.t: step "t" comes after step "s" in the top-level steps and has not run yet when it runs`},
	{"steps later under has", step1("    when: has(steps.t.output)\n    context_set: {x: 1}\n  - id: t\n    context_set: {y: 1}\n"), "t.yaml:4:15: ", `when: steps.t: step "t" comes after step "s"`},
	{"steps later by index", step1("    context_set: {x: \"${{ steps['t-2'].output }}\"}\n  - id: t-2\n    context_set: {y: 1}\n"), "t.yaml:4:27: ", `steps.t-2: step "t-2" comes after step "s"`},
	{"steps own entry", step1("    when: steps.s.status == 'pending'\n    context_set: {x: 1}\n"), "t.yaml:4:11: ", `steps.s: a step cannot read its own entry`},
	{"steps own output", step1("    context_set: {x: 1}\n    output: \"${{ steps.s.output }}\"\n"), "t.yaml:5:18: ", `steps.s: a step cannot read its own entry (it has no output while it runs; its output expression sees the raw output as output)`},
	{"steps not a dependency", step1("    run_after: []\n    context_set: {x: 1}\n  - id: t\n    run_after: []\n    context_set: {y: 1}\n  - id: u\n    run_after: [s]\n    context_set: {z: \"${{ steps.t.output }}\"}\n"), "t.yaml:11:27: ", `steps.t: step "t" has not run when step "u" starts: it does not run after "t" (add "t" to its run_after`},
	{"steps nested from outside", step1("    for_each: {items: input.xs, steps: [{id: send, context_set: {x: 1}}]}\n  - id: t\n    context_set: {y: \"${{ steps.send.output }}\"}\n"), "t.yaml:6:27: ", `steps.send: step "send" is nested in step "s" and not addressable outside it; use steps.s.output`},
	{"steps nested two deep", step1("    try:\n      steps:\n        - id: inner\n          parallel: {lanes: {a: [{id: deep, context_set: {x: 1}}]}}\n        - id: after\n          context_set: {y: \"${{ steps.deep.output }}\"}\n"), "t.yaml:9:33: ", `steps.deep: step "deep" is nested in step "inner" and not addressable outside it; use steps.inner.output`},
	{"steps in another lane", step1("    parallel:\n      lanes:\n        a: [{id: x, context_set: {v: 1}}]\n        b: [{id: y, context_set: {v: \"${{ steps.x.output }}\"}}]\n"), "t.yaml:7:43: ", `steps.x: step "x" is in lane "a" of step "s", another branch of step "s" than this step; it is not addressable here`},
	{"steps in the other branch", step1("    if:\n      condition: true\n      then: [{id: x, context_set: {v: 1}}]\n      else: [{id: y, when: has(steps.x.output), context_set: {v: 2}}]\n"), "t.yaml:7:32: ", `steps.x: step "x" is in the then list of step "s", another branch of step "s" than this step`},
	{"steps of the enclosing construct", step1("    for_each:\n      items: input.xs\n      steps:\n        - id: x\n          context_set: {v: \"${{ steps.s.output }}\"}\n"), "t.yaml:8:33: ", `steps.s: this step is nested in step "s", which has no output until it ends`},
	{"steps of catch from steps", step1("    try:\n      steps: [{id: x, context_set: {v: \"${{ steps.c.output }}\"}}]\n      catch: [{id: c, context_set: {v: 1}}]\n"), "t.yaml:5:45: ", `steps.c: step "c" is in the catch list of step "s", another branch of step "s" than this step`},
	{"steps of finally from catch", step1("    try:\n      steps: [{id: x, context_set: {v: 1}}]\n      catch: [{id: c, context_set: {v: \"${{ steps.f.output }}\"}}]\n      finally: [{id: f, context_set: {v: 1}}]\n"), "t.yaml:6:45: ", `steps.f: step "f" is in the finally list of step "s", another branch`},
	{"steps of the next iteration", step1("    repeat_until:\n      steps:\n        - id: a\n          context_set: {v: \"${{ steps.b.output }}\"}\n        - id: b\n          context_set: {v: 1}\n      until: true\n      max_iterations: 2\n"), "t.yaml:7:33: ", `steps.b: step "b" comes after step "a" in the repeat_until list of step "s"`},
	{"steps nested from the output", step1("    try: {steps: [{id: x, context_set: {v: 1}}]}\noutput: \"${{ steps.x.output }}\"\n"), "t.yaml:5:14: ", `output: steps.x: step "x" is nested in step "s" and not addressable outside it; use steps.s.output`},
	{"steps later from a nested step", step1("    for_each: {items: input.xs, steps: [{id: x, context_set: {v: \"${{ steps.t.output }}\"}}]}\n  - id: t\n    context_set: {v: 1}\n"), "t.yaml:4:71: ", `steps.t: step "t" comes after step "s" (which step "x" is nested in) in the top-level steps`},
	{"steps nested in try steps from catch", step1("    try:\n      steps: [{id: x, if: {condition: true, then: [{id: deep, context_set: {v: 1}}]}}]\n      catch: [{id: c, context_set: {v: \"${{ steps.deep.output }}\"}}]\n"), "t.yaml:6:45: ", `steps.deep: step "deep" is nested in step "x" and not addressable outside it; use steps.x.output`},
	{"steps nested in the body from until", step1("    repeat_until:\n      steps: [{id: x, try: {steps: [{id: deep, context_set: {v: 1}}]}}]\n      until: steps.deep.status == 'succeeded'\n      max_iterations: 2\n"), "t.yaml:6:14: ", `steps.deep: step "deep" is nested in step "x" and not addressable outside it; use steps.x.output`},
	{"item outside for_each", step1("    context_set: {x: \"${{ item.id }}\"}\n"), "t.yaml:4:27: ", "context_set.x: item is defined only in the steps of a for_each (the current element)"},
	{"item in for_each items", step1("    for_each: {items: item.xs, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:23: ", "for_each.items: item is defined only in the steps of a for_each"},
	{"item under another name", step1("    for_each:\n      items: input.xs\n      as: order\n      steps: [{id: x, when: item.ok, fail: {message: m}}]\n"), "t.yaml:7:29: ", `when: item is not defined here: the enclosing for_each "s" names its element "order" (as: order)`},
	{"item after the loop", step1("    for_each: {items: input.xs, steps: [{id: x, fail: {message: m}}]}\n    output: \"${{ item }}\"\n"), "t.yaml:5:18: ", "output: item is defined only in the steps of a for_each"},
	{"error outside catch", step1("    context_set: {x: \"${{ error.message }}\"}\n"), "t.yaml:4:27: ", "context_set.x: error is defined only in the steps of a try's catch list"},
	{"error in try steps", step1("    try:\n      steps: [{id: x, context_set: {v: \"${{ error }}\"}}]\n      catch: [{id: c, context_set: {v: 1}}]\n"), "t.yaml:5:45: ", "error is defined only in the steps of a try's catch list"},
	{"error in finally", step1("    try:\n      steps: [{id: x, context_set: {v: 1}}]\n      finally: [{id: f, when: error.message != '', context_set: {v: 1}}]\n"), "t.yaml:6:31: ", "when: error is defined only"},
	{"output outside output", step1("    context_set: {x: \"${{ output }}\"}\n"), "t.yaml:4:27: ", "output is defined only in a step's own output expression"},
	{"output in the definition output", step1("    context_set: {x: 1}\noutput: \"${{ output.x }}\"\n"), "t.yaml:5:14: ", "output: output is defined only in a step's own output expression"},
	{"retry_policy on for_each", step1("    retry_policy: {max_attempts: 3}\n    for_each: {items: input.xs, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:5: ", "retry_policy on a for_each step has no effect: a construct is not retried as a whole"},
	{"retry_policy on try", step1("    try: {steps: [{id: x, fail: {message: m}}]}\n    retry_policy: {max_attempts: 3}\n"), "t.yaml:5:5: ", "retry_policy on a try step has no effect"},
	{"retry_policy on if", step1("    retry_policy: {max_attempts: 2}\n    if: {condition: true, then: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:5: ", "retry_policy on a if step has no effect"},
	{"retry_policy on parallel", step1("    retry_policy: {max_attempts: 2}\n    parallel: {lanes: {a: [{id: x, fail: {message: m}}]}}\n"), "t.yaml:4:5: ", "retry_policy on a parallel step has no effect"},
	{"retry_policy on repeat_until", step1("    retry_policy: {max_attempts: 2}\n    repeat_until: {steps: [{id: x, context_set: {v: 1}}], until: true, max_iterations: 2}\n"), "t.yaml:4:5: ", "retry_policy on a repeat_until step has no effect"},
	{"retry_policy on wait", step1("    retry_policy: {max_attempts: 2}\n    wait: {signal: go}\n"), "t.yaml:4:5: ", "retry_policy on a wait step has no effect: a durable wait is entered once"},
	{"for_each concurrency over the cap", step1("    for_each: {items: input.xs, concurrency: 65, steps: [{id: x, fail: {message: m}}]}\n"), "t.yaml:4:46: ", "for_each s: concurrency 65 exceeds the limit of 64 (limits.for_each_concurrency; raise it with --max-for-each-concurrency, STARFLOW_MAX_FOR_EACH_CONCURRENCY or starflow.Config.Limits.ForEachConcurrency)"},
	{"max_iterations over the cap", step1("    repeat_until: {steps: [{id: x, context_set: {v: 1}}], until: true, max_iterations: 10001}\n"), "t.yaml:4:88: ", "repeat_until s: max_iterations 10001 exceeds the limit of 10000 (limits.max_iterations; raise it with --max-iterations, STARFLOW_MAX_ITERATIONS or starflow.Config.Limits.MaxIterations)"},
}

func init() {
	for name, src := range scopeDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, scopeInvalid...)
}
