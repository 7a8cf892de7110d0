//go:build chaos

package chaos

import (
	"strings"
)

// The workload's definitions. Every run takes {n: 0…inputs-1}; its output
// depends on n alone (the service's answers are a function of the request
// body), so an interrupted run's output can be compared with the output
// of an uninterrupted run of the same input. %[1]s is the service's URL.
// max_attempts is high: under chaos a run may lose its runner many times,
// and the run-level attempt budget (default 3) is not what is under test.
// chaos-linear and chaos-fanout recover in mode replay (from the first
// step: the side effects are sent again under a newer epoch), the others
// in mode resume (after the last committed checkpoint: a consumed wake is
// not waited for again).

// retry is the service_call retry policy: the service's 503s and lost
// connections are retried, fast.
const retry = `retry_policy: {max_attempts: 40, initial_interval: 20ms, backoff: 2, max_interval: 400ms, retry_on: "${{ (error.type == 'http' && error.status == 503) || error.type in ['network', 'timeout'] }}"}`

// effect is a service_call step's body of one side effect of value v.
func effect(v string) string {
	return `service_call:
      url: "%[1]s/effect"
      method: POST
      body: {n: "${{ ` + v + ` }}"}
      headers: {X-Chaos-Worker: "${{ env.CHAOS_WORKER }}"}
    ` + retry
}

var definitions = map[string]string{
	"chaos-linear": `name: chaos-linear
max_attempts: 1000
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: begin
    context_set: {n: "${{ input.n }}"}
  - id: charge
    ` + effect("input.n") + `
    output: "${{ output.body.value }}"
  - id: double
    pass: "${{ steps.charge.output * 2 }}"
  - id: record
    context_set: {total: "${{ steps.double.output + 1 }}"}
  - id: ship
    ` + effect("input.n + 100") + `
    output: "${{ output.body.value }}"
output: {charged: "${{ steps.charge.output }}", total: "${{ variables.total }}", shipped: "${{ steps.ship.output }}"}
`,
	"chaos-fanout": `name: chaos-fanout
max_attempts: 1000
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: each
    for_each:
      items: "${{ [0, 1, 2, 3, 4].map(i, input.n * 10 + i) }}"
      concurrency: 3
      steps:
        - id: item_effect
          ` + indent(effect("item"), 6) + `
          output: "${{ output.body.value }}"
  - id: sum
    pass: "${{ steps.each.output.size() }}"
output: {values: "${{ steps.each.output }}", count: "${{ steps.sum.output }}"}
`,
	"chaos-parallel": `name: chaos-parallel
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: all
    parallel:
      lanes:
        effect:
          - id: lane_effect
            ` + indent(effect("input.n + 200"), 8) + `
            output: "${{ output.body.value }}"
        compute:
          - id: triple
            pass: "${{ input.n * 3 }}"
        child:
          - id: call_child
            workflow_call: {workflow: chaos-child, input: {n: "${{ input.n }}"}}
output: "${{ steps.all.output }}"
`,
	"chaos-child": `name: chaos-child
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: child_effect
    ` + effect("input.n + 300") + `
    output: "${{ output.body.value }}"
  - id: shape
    pass: {child_of: "${{ input.n }}", value: "${{ steps.child_effect.output }}"}
output: "${{ steps.shape.output }}"
`,
	"chaos-race": `name: chaos-race
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: race
    parallel:
      mode: race
      lanes:
        fast:
          - id: quick
            pass: {winner: fast, n: "${{ input.n }}"}
        slow:
          - id: never
            wait: {signal: never, timeout: 1h}
output: "${{ steps.race.output }}"
`,
	"chaos-try": `name: chaos-try
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: pay
    try:
      steps:
        - id: try_effect
          ` + indent(effect("input.n + 400"), 6) + `
          output: "${{ output.body.value }}"
        - id: decide
          switch:
            cases:
              - when: "${{ input.n % 2 == 0 }}"
                steps:
                  - id: declined
                    fail: {type: Declined, message: "declined for ${{ input.n }}", details: {n: "${{ input.n }}"}}
            default:
              - id: accepted
                pass: {paid: "${{ steps.try_effect.output }}"}
      catch_when: "${{ error.type == 'Declined' }}"
      catch:
        - id: handle
          pass: {declined: "${{ error.details.n }}", type: "${{ error.type }}"}
output: "${{ steps.pay.output }}"
`,
	"chaos-waits": `name: chaos-waits
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: go
    wait: {signal: go, timeout: 1h}
  - id: ask
    wait:
      signal: approve
      timeout: 1h
      notify: {url: "%[1]s/notify", body: {n: "${{ input.n }}"}}
  - id: cool
    wait: {timer: 1s}
  - id: after
    ` + effect("input.n + 500") + `
    output: "${{ output.body.value }}"
output: {signal: "${{ steps.go.output }}", token: "${{ steps.ask.output }}", after: "${{ steps.after.output }}"}
`,
	"chaos-job": `name: chaos-job
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
steps:
  - id: shout
    job:
      type: uppercase
      input: {text: "${{ 'order-' + string(input.n) + '-ok' }}"}
      timeout: 10m
      heartbeat_timeout: 3s
    retry_policy: {max_attempts: 40, initial_interval: 100ms, max_interval: 1s}
output: "${{ steps.shout.output.text }}"
`,
	"chaos-tick": `name: chaos-tick
max_attempts: 1000
recovery_mode: resume
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
schedules:
  - cron: "@every 2s"
    input: {n: 3}
    overlap: allow
    catchup: all
steps:
  - id: tick_effect
    ` + effect("input.n + 600") + `
    output: "${{ output.body.value }}"
output: {ticked: "${{ steps.tick_effect.output }}"}
`,
}

// enqueued are the workflows the producers enqueue (chaos-child runs are
// started by chaos-parallel, chaos-tick runs by the schedule).
var enqueued = []string{"chaos-linear", "chaos-fanout", "chaos-parallel", "chaos-race", "chaos-try", "chaos-waits", "chaos-job"}

// definition is the YAML of name with the service's URL filled in.
func definition(name, serviceURL string) string {
	return strings.ReplaceAll(definitions[name], "%[1]s", serviceURL)
}

// indent adds n spaces after every newline of s (a step body nested
// deeper than the top level).
func indent(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}
