package workflow

// Definitions using the language of issue 14 (typed errors, catch_when,
// retry_on and jitter, switch, pass, loop variables, racing lanes). init
// adds them to validDefs and invalidCases, so the schema test, the round
// trip and the fuzz seeds cover them.

var languageDefs = map[string]string{
	"language.yaml": `name: language
retry_on: "error.type in ['network', 'timeout'] || error.type == 'Stale'"
defaults:
  retry_policy: {max_attempts: 4, initial_interval: 1s, jitter: equal, retry_on: "error.type == 'network'"}
steps:
  - id: guard
    try:
      steps:
        - id: get
          service_call: {url: https://api.example.com/orders}
          retry_policy: {jitter: full, retry_on: "${{ error.type == 'http' && error.status in [404, 503] }}"}
      catch_when: "error.type == 'http' && error.status == 404"
      catch:
        - id: reraise
          fail: {message: "${{ error.message }}", type: "${{ error.type }}", details: "${{ error.details }}"}
  - id: pick
    switch:
      cases:
        - when: "input.n > 10"
          steps: [{id: big, pass: big}]
        - when: true
          steps: [{id: other, pass: {n: "${{ input.n }}", list: [1, 2.0]}}]
      default:
        - {id: none, pass: null}
  - id: each
    for_each:
      items: input.xs
      as: x
      index_as: i
      steps:
        - id: cell
          pass: "${{ string(i) + ':' + string(x) }}"
          when: "${{ i >= 0 }}"
  - id: loop
    repeat_until:
      max_iterations: 3
      until: "iteration >= 1"
      steps: [{id: tick, pass: "${{ iteration }}"}]
  - id: race
    parallel:
      mode: race
      lanes:
        a: [{id: la, pass: 1}]
        b: [{id: lb, fail: {message: no, type: Refused}}]
  - id: all
    parallel:
      mode: all
      lanes:
        a: [{id: aa, pass: 2}]
`,
}

var languageInvalid = []invalidCase{
	{"retry_on not boolean", step1("    fail: {message: m}\n    retry_policy: {retry_on: \"'yes'\"}\n"), "t.yaml:5:30: ", `retry_policy.retry_on must be a boolean expression; "'yes'" yields string`},
	{"retry_on does not compile", step1("    fail: {message: m}\n    retry_policy: {retry_on: \"error.type ==\"}\n"), "t.yaml:5:31: ", `retry_policy.retry_on: expression "error.type =="`},
	{"definition retry_on int", "name: a\nretry_on: \"1 + 1\"\nsteps: [{id: x, fail: {message: m}}]\n", "t.yaml:2:11: ", `retry_on must be a boolean expression; "1 + 1" yields int`},
	{"jitter unknown", step1("    fail: {message: m}\n    retry_policy: {jitter: half}\n"), "t.yaml:5:28: ", `retry_policy.jitter must be one of full, equal, none, not "half"`},
	{"catch_when int", step1("    try:\n      steps: [{id: x, fail: {message: m}}]\n      catch_when: \"size(error.message)\"\n      catch: [{id: y, pass: 1}]\n"), "t.yaml:6:19: ", `try.catch_when must be a boolean expression; "size(error.message)" yields int`},
	{"catch_when without catch", step1("    try:\n      steps: [{id: x, fail: {message: m}}]\n      catch_when: true\n"), "t.yaml:6:7: ", "try.catch_when has no effect without a catch list"},
	{"error outside catch or retry_on", step1("    pass: \"${{ error.type }}\"\n"), "t.yaml:4:16: ", "error is defined only in the steps of a try's catch list, its catch_when, and retry_on"},
	{"fail type invalid", step1("    fail: {message: m, type: \"not a type\"}\n"), "t.yaml:4:30: ", `fail.type "not a type" must match [A-Za-z_][A-Za-z0-9_.:-]*`},
	{"fail unknown field", step1("    fail: {message: m, kind: x}\n"), "t.yaml:4:24: ", `unknown field "kind" in fail; allowed: message, type, details`},
	{"switch no cases", step1("    switch: {cases: []}\n"), "t.yaml:4:21: ", "switch.cases must list at least one case"},
	{"switch missing cases", step1("    switch: {default: [{id: x, pass: 1}]}\n"), "t.yaml:4:5: ", `switch is missing "cases"`},
	{"switch case missing steps", step1("    switch:\n      cases:\n        - when: true\n"), "t.yaml:6:11: ", `switch.cases[0] is missing "steps"`},
	{"switch case when not boolean", step1("    switch:\n      cases:\n        - when: \"input.n + 1\"\n          steps: [{id: x, pass: 1}]\n"), "t.yaml:6:17: ", `switch.cases[0].when must be a boolean expression; "input.n + 1" yields`},
	{"switch case unknown field", step1("    switch:\n      cases:\n        - if: true\n          steps: [{id: x, pass: 1}]\n"), "t.yaml:6:11: ", `unknown field "if" in switch.cases[0]; allowed: when, steps`},
	{"switch default empty", step1("    switch:\n      cases: [{when: true, steps: [{id: x, pass: 1}]}]\n      default: []\n"), "t.yaml:6:16: ", "switch.default must not be empty"},
	{"switch branch reads another", step1("    switch:\n      cases:\n        - when: true\n          steps: [{id: x, pass: 1}]\n        - when: true\n          steps: [{id: y, pass: \"${{ steps.x.output }}\"}]\n"), "t.yaml:9:38: ", `another branch of step "s"`},
	{"pass retry_policy", step1("    pass: 1\n    retry_policy: {max_attempts: 2}\n"), "t.yaml:5:5: ", "retry_policy on a pass step has no effect"},
	{"index outside for_each", step1("    pass: \"${{ index }}\"\n"), "t.yaml:4:12: ", "undeclared reference to 'index'"},
	{"iteration outside repeat_until", step1("    pass: \"${{ iteration }}\"\n"), "t.yaml:4:12: ", "undeclared reference to 'iteration'"},
	{"index_as same as as", step1("    for_each: {items: input.xs, as: x, index_as: x, steps: [{id: y, pass: 1}]}\n"), "t.yaml:4:50: ", `for_each.index_as "x" is the name of the item (as) too`},
	{"index_as reserved", step1("    for_each: {items: input.xs, index_as: steps, steps: [{id: y, pass: 1}]}\n"), "t.yaml:4:43: ", `for_each.index_as "steps" is a reserved name`},
	{"parallel mode unknown", step1("    parallel: {mode: first, lanes: {a: [{id: x, pass: 1}]}}\n"), "t.yaml:4:22: ", `parallel.mode must be one of all, race, not "first"`},
	{"race fail_fast", step1("    parallel: {mode: race, fail_fast: false, lanes: {a: [{id: x, pass: 1}]}}\n"), "t.yaml:4:28: ", "parallel.fail_fast has no effect with mode race"},
}

func init() {
	for name, src := range languageDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, languageInvalid...)
}
