package workflow

import "strings"

// Definitions shared by the tests, the schema test and the fuzz seeds.

// testOpts registers two custom step types, notify and charge_card.
var testOpts = ParseOptions{IsStepType: func(name string) bool {
	return name == "notify" || name == "charge_card"
}}

// validDefs are definitions that parse, by file name.
var validDefs = map[string]string{
	// Every field of SPEC §2 that belongs to the implemented step kinds.
	"full.yaml": `# every field this version knows
name: order-fulfilment
recovery_mode: resume
runner_pool: payments
max_attempts: 5
input_schema:
  type: object
  required: [sku, qty]
  properties:
    sku: {type: string, minLength: 1}
    qty: {type: integer, minimum: 1}
    email: {type: string, format: email}
secrets: [PAYMENT_TOKEN, _other2]
defaults:
  timeout: 30s
  retry_policy: {max_attempts: 3, initial_interval: 1s, backoff: 2.0, max_interval: 1m}
steps:
  - id: reserve
    timeout: 10s
    retry_policy:
      max_attempts: 5
      initial_interval: 500ms
      backoff: 1.5
      max_interval: 30s
    service_call:
      method: POST
      url: "${{ env.INVENTORY_URL + '/reserve' }}"
      headers: {Authorization: "${{ 'Bearer ' + secrets.PAYMENT_TOKEN }}", X-Count: 3}
      query: {dry_run: false, tag: "a-${{ input.sku }}"}
      body: {sku: "${{ input.sku }}", qty: "${{ input.qty }}", ratio: 1.0, list: [1, 2.5, "x"]}
      expect_status: [200, 201]
    output: "${{ output.body }}"
  - id: remember
    context_set:
      reservation: "${{ steps.reserve.output.id }}"
      note: plain text
      nothing: null
  - id: check
    when: steps.reserve.output.id != ''
    run_after: [remember]
    service_call: {url: "https://example.com/check?sku=${{ input.sku }}"}
  - id: audit
    run_after: [reserve]
    when: true
    service_call: {method: GET, url: https://audit.example.com/log}
  - id: notify-ops
    run_after: [check, audit]
    notify: {channel: ops, text: "reserved ${{ input.sku }}"}
  - id: give-up
    when: "${{ input.qty > 100 }}"
    fail: {message: "too many: ${{ input.qty }}"}
output:
  reservation: "${{ variables.reservation }}"
  checked: "${{ has(steps.check.output) }}"
`,

	"minimal.yaml": `name: m
steps:
  - id: "0"
    fail: {message: stop}
`,

	// JSON with what YAML lacks: tabs, \/ and a surrogate pair.
	"tabs.json": "{\t\"name\": \"tabs\",\n\t\"steps\": [\n\t\t{\"id\": \"a\", \"context_set\": {\"path\": \"a\\/b\", \"smile\": \"\\ud83d\\ude00\", \"n\": -0.0}},\n\t\t{\"id\": \"b\", \"charge_card\": null, \"when\": \"variables.n == 0.0\"}\n\t]\n}\n",

	"anchors.yaml": `name: anchors
defaults:
  retry_policy: &rp {max_attempts: 2, backoff: 3}
steps:
  - &call
    id: one
    retry_policy: *rp
    service_call:
      url: https://example.com/x
      headers: &h {Accept: application/json}
  - <<: *call
    id: two
    service_call: {url: https://example.com/y, headers: *h}
  - id: three
    run_after: [one, two]
    context_set: {both: "${{ [steps.one.output.status, steps.two.output.status] }}"}
`,

	// Numbers: int vs double is kept through the canonical form.
	"numbers.yaml": `name: numbers
steps:
  - id: n
    context_set:
      i: 1
      f: 1.0
      e: 1e3
      big: 9007199254740993
      neg: -0.0
      hex: 0x1F
      tiny: 1.5e-300
      huge: 1.0e300
      s: "1"
      t: 2001-12-14
      str: ~
    output: [1, 1.0, "${{ 1.0 }}"]
`,
}

// invalidCase is a definition Parse must refuse, with the position and a
// fragment of the message it must report.
type invalidCase struct {
	name string // the kind of problem
	src  string
	want string // "file:line:col: " prefix of one reported error
	frag string // in that error's message
}

const okSteps = "steps:\n  - id: a\n    fail: {message: x}\n"

var invalidCases = []invalidCase{
	{"yaml syntax", "name: a\n  b: c\n", "t.yaml:2: ", "syntax error: mapping values are not allowed"},
	// The `[}` is on line 2 (the YAML library says "line 1": it counts its
	// parser's lines from 0; see yamlerrors.go).
	{"json syntax", "{\"name\": \"a\",\n \"steps\": [}\n", "t.yaml:2: ", "syntax error: did not find expected node content"},
	{"empty", "# nothing\n", "t.yaml:1:1: ", "empty"},
	{"not a mapping", "- a\n- b\n", "t.yaml:1:1: ", "the definition must be a mapping, not a list"},
	{"two documents", "name: a\n" + okSteps + "---\nname: b\n", "t.yaml:5:1: ", "one YAML document"},
	{"unknown root field", "name: a\nnmae: b\n" + okSteps, "t.yaml:2:1: ", `unknown field "nmae" in the definition (did you mean "name"?); allowed: name, recovery_mode`},
	{"unknown step field", "name: a\nsteps:\n  - id: a\n    retry_polcy: {}\n    fail: {message: x}\n", "t.yaml:4:5: ", `unknown field "retry_polcy": not a step field or a registered step type (did you mean "retry_policy"?)`},
	{"unregistered custom type", "name: a\nsteps:\n  - id: a\n    send_sms: {to: x}\n", "t.yaml:4:5: ", `unknown field "send_sms": not a step field or a registered step type`},
	{"unknown service_call field", "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', verb: GET}\n", "t.yaml:4:41: ", `unknown field "verb" in service_call; allowed: method, url`},
	{"unknown retry_policy field", "name: a\ndefaults:\n  retry_policy: {tries: 3}\n" + okSteps, "t.yaml:3:18: ", `unknown field "tries" in defaults.retry_policy`},
	{"wrong type", "name: a\nmax_attempts: \"3\"\n" + okSteps, "t.yaml:2:15: ", "max_attempts must be an integer, not a string"},
	{"float for integer", "name: a\nmax_attempts: 3.0\n" + okSteps, "t.yaml:2:15: ", "max_attempts must be an integer, not a number"},
	{"missing name", okSteps, "t.yaml:1:1: ", `missing required field "name"`},
	{"missing steps", "name: a\n", "t.yaml:1:1: ", `missing required field "steps"`},
	{"empty steps", "name: a\nsteps: []\n", "t.yaml:2:8: ", "steps must not be empty"},
	{"steps not a list", "name: a\nsteps: {id: a}\n", "t.yaml:2:8: ", "steps must be a list, not a mapping"},
	{"bad name", "name: Order_Fulfilment\n" + okSteps, "t.yaml:1:7: ", `name "Order_Fulfilment" must match [a-z0-9][a-z0-9_-]*`},
	{"bad step id", "name: a\nsteps:\n  - id: -a\n    fail: {message: x}\n", "t.yaml:3:9: ", `step id "-a" must match`},
	{"missing step id", "name: a\nsteps:\n  - fail: {message: x}\n", "t.yaml:3:5: ", `step is missing its "id"`},
	{"duplicate step id", "name: a\nsteps:\n  - id: a\n    fail: {message: x}\n  - id: a\n    fail: {message: y}\n", "t.yaml:5:9: ", `duplicate step id "a" (first defined at line 3)`},
	{"no kind", "name: a\nsteps:\n  - id: a\n    timeout: 1s\n", "t.yaml:3:5: ", `step "a" has no kind`},
	{"two kinds", "name: a\nsteps:\n  - id: a\n    fail: {message: x}\n    context_set: {x: 1}\n", "t.yaml:5:5: ", `step "a" has more than one kind: fail (line 4) and context_set`},
	{"run_after unknown", "name: a\nsteps:\n  - id: a\n    fail: {message: x}\n  - id: b\n    run_after: [a, c]\n    fail: {message: x}\n", "t.yaml:6:20: ", `run_after: no step "c" in this steps list`},
	{"run_after self", "name: a\nsteps:\n  - id: a\n    run_after: [a]\n    fail: {message: x}\n", "t.yaml:4:17: ", `step "a" cannot run after itself`},
	{"run_after cycle", "name: a\nsteps:\n  - id: a\n    run_after: [b]\n    fail: {message: x}\n  - id: b\n    run_after: [a]\n    fail: {message: x}\n", "t.yaml:4:17: ", "run_after cycle: a → b → a"},
	{"run_after cycle through list order", "name: a\nsteps:\n  - id: a\n    run_after: [c]\n    fail: {message: x}\n  - id: b\n    fail: {message: x}\n  - id: c\n    fail: {message: x}\n", "t.yaml:4:17: ", "run_after cycle: a → c → b → a (a step without run_after runs after the step before it)"},
	{"recovery_mode", "name: a\nrecovery_mode: retry\n" + okSteps, "t.yaml:2:16: ", "recovery_mode must be one of replay, resume, manual"},
	{"max_attempts zero", "name: a\nmax_attempts: 0\n" + okSteps, "t.yaml:2:15: ", "max_attempts must be at least 1"},
	{"bad duration", "name: a\ndefaults: {timeout: 1d}\n" + okSteps, "t.yaml:2:21: ", `defaults.timeout: invalid duration "1d"`},
	{"duration too large", "name: a\ndefaults: {timeout: 99999999h}\n" + okSteps, "t.yaml:2:21: ", `defaults.timeout: duration "99999999h" is too large: at most 2562047h (about 292 years)`},
	{"negative duration", "name: a\nsteps:\n  - id: a\n    timeout: -5s\n    fail: {message: x}\n", "t.yaml:4:14: ", "timeout must be positive"},
	{"duration not a string", "name: a\nsteps:\n  - id: a\n    timeout: 30\n    fail: {message: x}\n", "t.yaml:4:14: ", `timeout must be a duration string like "30s", not an integer`},
	{"retry max_attempts", "name: a\nsteps:\n  - id: a\n    retry_policy: {max_attempts: 0}\n    fail: {message: x}\n", "t.yaml:4:34: ", "retry_policy.max_attempts must be at least 1"},
	{"retry backoff", "name: a\nsteps:\n  - id: a\n    retry_policy: {backoff: 0.5}\n    fail: {message: x}\n", "t.yaml:4:29: ", "retry_policy.backoff must be at least 1"},
	{"retry interval", "name: a\nsteps:\n  - id: a\n    retry_policy: {initial_interval: 0s}\n    fail: {message: x}\n", "t.yaml:4:38: ", "retry_policy.initial_interval must be positive"},
	{"retry interval order", "name: a\nsteps:\n  - id: a\n    retry_policy: {initial_interval: 1m, max_interval: 1s}\n    fail: {message: x}\n", "t.yaml:4:56: ", "retry_policy.max_interval (1s) is less than initial_interval (1m0s)"},
	{"expect_status", "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', expect_status: [200, 600]}\n", "t.yaml:4:62: ", "expect_status 600 is not an HTTP status (100–599)"},
	{"method", "name: a\nsteps:\n  - id: a\n    service_call: {method: FETCH, url: 'https://x.io'}\n", "t.yaml:4:28: ", `service_call.method "FETCH" is not an HTTP method`},
	{"missing url", "name: a\nsteps:\n  - id: a\n    service_call: {method: GET}\n", "t.yaml:4:5: ", `service_call is missing "url"`},
	{"relative url", "name: a\nsteps:\n  - id: a\n    service_call: {url: /x}\n", "t.yaml:4:25: ", `service_call.url "/x" is not an absolute http or https URL`},
	{"bad header name", "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', headers: {'X Y': z}}\n", "t.yaml:4:51: ", `"X Y" is not a valid HTTP header name`},
	{"header value type", "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', headers: {X: [1]}}\n", "t.yaml:4:54: ", "service_call.headers.X must be a string, number or boolean, not a list"},
	{"fail without message", "name: a\nsteps:\n  - id: a\n    fail: {}\n", "t.yaml:4:5: ", `fail is missing "message"`},
	{"expression syntax in plain scalar", "name: a\nsteps:\n  - id: a\n    fail:\n      message: failed ${{ input. }}\n", "t.yaml:5:23: ", `fail.message: expression "input.": `},
	{"expression syntax in quoted scalar", "name: a\nsteps:\n  - id: a\n    context_set: {x: \"é ${{ 1 + }}\"}\n", "t.yaml:4:25: ", `context_set.x: expression "1 +"`},
	{"expression in block scalar", "name: a\nsteps:\n  - id: a\n    context_set:\n      x: |\n        ${{ 1 + }}\n", "t.yaml:5:10: ", `context_set.x: expression "1 +"`},
	{"expression after escape", "name: a\nsteps:\n  - id: a\n    context_set: {x: \"\\t${{ 1 + }}\"}\n", "t.yaml:4:22: ", `context_set.x: expression "1 +"`},
	{"expression unclosed", "name: a\nsteps:\n  - id: a\n    output: \"ok ${{ output\"\n    fail: {message: x}\n", "t.yaml:4:17: ", "missing closing }}"},
	{"expression unknown function", "name: a\nsteps:\n  - id: a\n    service_call: {url: 'https://x.io', body: {n: '${{ nosuch(1) }}'}}\n", "t.yaml:4:52: ", `service_call.body.n: expression "nosuch(1)"`},
	{"expression in list", "name: a\noutput: [1, '${{ ) }}']\n" + okSteps, "t.yaml:2:14: ", `output[1]: expression ")"`},
	{"bare when", "name: a\nsteps:\n  - id: a\n    when: input.qty >\n    fail: {message: x}\n", "t.yaml:4:11: ", `when: expression "input.qty >"`},
	{"when interpolated", "name: a\nsteps:\n  - id: a\n    when: \"${{ true }} \"\n    fail: {message: x}\n", "t.yaml:4:11: ", "when must be one expression"},
	{"when number", "name: a\nsteps:\n  - id: a\n    when: 1\n    fail: {message: x}\n", "t.yaml:4:11: ", "when must be a boolean or an expression, not an integer"},
	{"output null", "name: a\noutput: null\n" + okSteps, "t.yaml:2:9: ", "output must not be null"},
	{"reserved prefix", "name: a\nsteps:\n  - id: a\n    context_set: {__celestialWait: 1}\n", "t.yaml:4:19: ", `context_set may not write "__celestialWait": the prefix __celestial is reserved`},
	{"empty context_set", "name: a\nsteps:\n  - id: a\n    context_set: {}\n", "t.yaml:4:18: ", "context_set must set at least one variable"},
	{"secret name", "name: a\nsecrets: [OK, 9BAD]\n" + okSteps, "t.yaml:2:15: ", `secret name "9BAD" must match [A-Za-z_][A-Za-z0-9_]*`},
	{"secret twice", "name: a\nsecrets:\n  - TOKEN\n  - TOKEN\n" + okSteps, "t.yaml:4:5: ", `secret "TOKEN" is listed twice (first at line 3)`},
	{"input_schema invalid", "name: a\ninput_schema:\n  type: object\n  properties:\n    qty: {type: integr}\n" + okSteps, "t.yaml:5:17: ", "input_schema is not a valid JSON Schema: at /properties/qty/type"},
	{"input_schema external ref", "name: a\ninput_schema: {$ref: 'file:///etc/passwd'}\n" + okSteps, "t.yaml:2:15: ", "input_schema does not compile"},
	{"input_schema not a mapping", "name: a\ninput_schema: [1]\n" + okSteps, "t.yaml:2:15: ", "input_schema must be a mapping"},
	{"duplicate key yaml", "name: a\nsteps:\n  - id: a\n    id: b\n    fail: {message: x}\n", "t.yaml:4:5: ", `duplicate key "id" (first at line 3)`},
	{"duplicate key json", "{\"name\": \"a\", \"steps\": [{\"id\": \"a\", \"fail\": {\"message\": \"x\", \"message\": \"y\"}}], \"name\": \"b\"}", "t.yaml:1:81: ", `duplicate key "name" (first at line 1)`},
	{"json column after escape", "{\"name\": \"a\", \"steps\": [{\"id\": \"a\", \"context_set\": {\"p\\/q\": \"${{ ) }}\"}}]}", "t.yaml:1:62: ", `context_set.p/q: expression ")"`},
	{"non-string key", "name: a\nsteps:\n  - id: a\n    context_set: {200: ok}\n", "t.yaml:4:19: ", "mapping keys must be strings"},
	{"integer out of range", "name: a\nmax_attempts: 99999999999999999999\n" + okSteps, "t.yaml:2:15: ", "integer 99999999999999999999 is out of range"},
	{"infinity", "name: a\noutput: {x: .inf}\n" + okSteps, "t.yaml:2:13: ", "numbers must be finite"},
	{"negative infinity", "name: a\nsteps:\n  - id: a\n    context_set: {x: -.Inf}\n", "t.yaml:4:22: ", "numbers must be finite, not -.Inf"},
	{"nan", "name: a\nsteps:\n  - id: a\n    context_set: {x: [1, .NaN]}\n", "t.yaml:4:26: ", "numbers must be finite, not .NaN"},
	{"float overflow", "name: a\noutput: {x: 1e400}\n" + okSteps, "t.yaml:2:13: ", "number 1e400 is out of range: numbers must be finite"},
	{"integer overflow digits", "name: a\noutput: {x: 1" + strings.Repeat("0", 400) + "}\n" + okSteps, "t.yaml:2:13: ", "is out of range (integers are 64-bit)"},
	{"float overflow negative", "name: a\noutput: {x: -1.5E+309}\n" + okSteps, "t.yaml:2:13: ", "number -1.5E+309 is out of range"},
	{"tagged float overflow", "name: a\noutput: {x: !!float '1e400'}\n" + okSteps, "t.yaml:2:13: ", "1e400"},
	{"json float overflow", "{\"name\": \"a\", \"output\": {\"x\": 1e400}, \"steps\": [{\"id\": \"a\", \"fail\": {\"message\": \"x\"}}]}", "t.yaml:1:31: ", "number 1e400 is out of range"},
	{"input_schema infinity", "name: a\ninput_schema: {type: object, properties: {q: {type: number, maximum: .inf}}}\n" + okSteps, "t.yaml:2:70: ", "numbers must be finite, not .inf"},
	{"unsupported tag", "name: a\noutput: !!binary aGk=\n" + okSteps, "t.yaml:2:9: ", "unsupported YAML tag !!binary"},
	{"invalid utf-8", "name: a\noutput: \"\xff\"\n" + okSteps, "t.yaml:2:10: ", "not valid UTF-8"},
	{"unknown anchor", "name: a\noutput: *nope\n" + okSteps, "t.yaml:2:9: ", "unknown anchor \"nope\""},
	{"merge of a scalar", "name: a\nsteps:\n  - <<: 3\n    id: a\n    fail: {message: x}\n", "t.yaml:3:9: ", "the value of << must be a mapping"},
	{"alias cycle", "name: a\noutput: &x [1, *x]\n" + okSteps, "t.yaml:2:16: ", "alias *x refers to a value that contains it"},
	{"key too long", "name: a\noutput: {" + strings.Repeat("k", 1023) + ": 1}\n" + okSteps, "t.yaml:2:10: ", "key is too long: 1025 characters as JSON writes it, the limit is 1024"},
	{"key too long escaped", "name: a\noutput: {\"" + strings.Repeat("&", 200) + "\": 1}\n" + okSteps, "t.yaml:2:10: ", "key is too long: 1202 characters"},
	{"too deep", "name: a\noutput: " + strings.Repeat("[", 600) + strings.Repeat("]", 600) + "\n" + okSteps, "t.yaml:2:", "values nest more than 500 levels deep"},
	{"billion laughs", laughs, "t.yaml:", "has more than 100000 values"},
}

// laughs expands to 10^9 values.
const laughs = `name: a
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
