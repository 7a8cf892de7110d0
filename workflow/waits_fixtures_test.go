package workflow

// Fixtures of the durable kinds (wait, workflow_call, session_read,
// session_write), added to validDefs and invalidCases.

var waitDefs = map[string]string{
	"waits.yaml": `name: waits
secrets: [HOOK_TOKEN]
steps:
  - id: approve
    wait:
      approval:
        form: {amount: "${{ input.amount }}", reason: {type: string}}
        signal: manager
      timeout: 72h
      notify:
        url: https://approvals.example.com/hooks
        headers: {Authorization: "${{ 'Bearer ' + secrets.HOOK_TOKEN }}"}
        body: {order: "${{ input.order }}"}
  - id: shipped
    wait: {signal: shipped, correlation_key: "${{ input.order }}", timeout: 1h}
  - id: cool_off
    wait: {timer: 10m}
  - id: deadline
    wait: {until: "${{ input.deliver_at }}"}
  - id: fixed
    wait: {until: "2030-01-02T15:04:05Z"}
  - id: bare_approval
    wait: {approval: {}}
  - id: child
    workflow_call: {workflow: invoice, input: {order: "${{ input.order }}"}, revision: current}
  - id: child_pinned
    workflow_call:
      workflow: invoice
      input: "${{ {'order': input.order} }}"
      revision: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  - id: remember
    session_write: {session: "${{ input.user }}", key: cart, value: {items: [1, 2]}, keep_until: 24h}
  - id: remember_until
    session_write: {session: s, key: k, value: "${{ null }}", keep_until: "2030-01-02T15:04:05Z"}
  - id: remember_expr
    session_write: {session: s, key: k2, value: 1.0, keep_until: "${{ input.until }}"}
  - id: recall
    session_read: {session: "${{ input.user }}", key: cart, default: {items: []}}
  - id: recall_plain
    session_read: {session: s, key: k}
`,
}

var waitInvalid = []invalidCase{
	{"wait no form", step1("    wait: {timeout: 1h}\n"), "t.yaml:4:5: ", "wait needs exactly one of signal, timer, until, approval"},
	{"wait two forms", step1("    wait: {signal: x, timer: 1m}\n"), "t.yaml:4:5: ", "wait needs exactly one of signal, timer, until, approval, not signal and timer"},
	{"wait bad signal", step1("    wait: {signal: 'a b'}\n"), "t.yaml:4:20: ", `wait.signal "a b" must be 1 to 200 characters`},
	{"wait reserved signal", step1("    wait: {signal: starflow.child}\n"), "t.yaml:4:20: ", `wait.signal "starflow.child" must be`},
	{"wait signal expression", step1("    wait: {signal: [x]}\n"), "t.yaml:4:20: ", "wait.signal must be a string, not a list"},
	{"wait timer duration", step1("    wait: {timer: 10d}\n"), "t.yaml:4:19: ", `wait.timer: invalid duration "10d"`},
	{"wait timer timeout", step1("    wait: {timer: 10m, timeout: 1h}\n"), "t.yaml:4:24: ", "wait.timeout applies to signal and approval waits; a timer wait ends at its deadline"},
	{"wait until literal", step1("    wait: {until: tomorrow}\n"), "t.yaml:4:19: ", `wait.until "tomorrow" is not an RFC 3339 timestamp`},
	{"wait until bad expression", step1("    wait: {until: '${{ 1 + }}'}\n"), "t.yaml:4:", `wait.until: expression "1 +"`},
	{"wait until notify", step1("    wait:\n      until: '2030-01-02T15:04:05Z'\n      notify: {url: 'https://x.io'}\n"), "t.yaml:6:7: ", "wait.notify applies to signal and approval waits"},
	{"wait unknown field", step1("    wait: {signal: x, timout: 1h}\n"), "t.yaml:4:23: ", `unknown field "timout" in wait (did you mean "timeout"?)`},
	{"wait notify no url", step1("    wait: {signal: x, notify: {body: {a: 1}}}\n"), "t.yaml:4:23: ", `wait.notify is missing "url"`},
	{"wait notify relative url", step1("    wait: {signal: x, notify: {url: /hook}}\n"), "t.yaml:4:37: ", `wait.notify.url "/hook" is not an absolute http or https URL`},
	{"wait notify body list", step1("    wait: {signal: x, notify: {url: 'https://x.io', body: [1]}}\n"), "t.yaml:4:59: ", "wait.notify.body must be a mapping"},
	{"wait notify header", step1("    wait: {signal: x, notify: {url: 'https://x.io', headers: {'A B': c}}}\n"), "t.yaml:4:63: ", `"A B" is not a valid HTTP header name`},
	{"approval form list", step1("    wait: {approval: {form: [1]}}\n"), "t.yaml:4:29: ", "wait.approval.form must be a mapping, not a list"},
	{"approval unknown field", step1("    wait: {approval: {fields: {}}}\n"), "t.yaml:4:23: ", `unknown field "fields" in wait.approval`},
	{"correlation_key list", step1("    wait: {signal: x, correlation_key: [1]}\n"), "t.yaml:4:40: ", "wait.correlation_key must be a string"},
	{"workflow_call missing workflow", step1("    workflow_call: {input: {}}\n"), "t.yaml:4:5: ", `workflow_call is missing "workflow"`},
	{"workflow_call bad name", step1("    workflow_call: {workflow: Invoice}\n"), "t.yaml:4:31: ", `workflow_call.workflow "Invoice" must be a workflow name`},
	{"workflow_call bad revision", step1("    workflow_call: {workflow: a, revision: latest}\n"), "t.yaml:4:44: ", `workflow_call.revision "latest" must be "current" or a revision`},
	{"workflow_call input list", step1("    workflow_call: {workflow: a, input: [1]}\n"), "t.yaml:4:41: ", "workflow_call.input must be a mapping"},
	{"session_read missing key", step1("    session_read: {session: s}\n"), "t.yaml:4:5: ", `session_read is missing "key"`},
	{"session_read default null", step1("    session_read: {session: s, key: k, default: null}\n"), "t.yaml:4:49: ", "session_read.default must not be null"},
	{"session_write missing value", step1("    session_write: {session: s, key: k}\n"), "t.yaml:4:5: ", `session_write is missing "value"`},
	{"session_write keep_until", step1("    session_write: {session: s, key: k, value: 1, keep_until: forever}\n"), "t.yaml:4:63: ", `session_write.keep_until "forever" is neither an RFC 3339 timestamp`},
	{"session_write bad expression", step1("    session_write: {session: s, key: k, value: '${{ ) }}'}\n"), "t.yaml:4:", `session_write.value: expression ")"`},
	{"nested wait error", step1("    try: {steps: [{id: x, wait: {timer: soon}}]}\n"), "t.yaml:4:41: ", `wait.timer: invalid duration "soon"`},
	{"durable kind as custom type", step1("    wait: {signal: x}\n    notify: {}\n"), "t.yaml:5:5: ", `step "s" has more than one kind: wait (line 4) and notify`},
}

func init() {
	for name, src := range waitDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, waitInvalid...)
}
