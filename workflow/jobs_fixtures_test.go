package workflow

// Definitions with job steps (issue 15), added to validDefs and
// invalidCases: the schema test, the round trip and the fuzz seeds cover
// them.

var jobDefs = map[string]string{
	"jobs.yaml": `name: jobs
defaults:
  retry_policy: {max_attempts: 5, retry_on: "error.type != 'bad_input'"}
steps:
  - id: resize
    job:
      type: image.resize
      input: {url: "${{ input.url }}", sizes: [64, 128]}
      timeout: 1h
      heartbeat_timeout: 10s
    retry_policy: {max_attempts: 3, initial_interval: 2s}
    output: "${{ output.urls }}"
  - id: each
    for_each:
      items: "${{ steps.resize.output }}"
      as: u
      steps:
        - id: scan
          job: {type: "scan:v2"}
`,
}

var jobInvalid = []invalidCase{
	{"job missing type", step1("    job: {input: {a: 1}}\n"), "t.yaml:4:5: ", `job is missing "type"`},
	{"job type invalid", step1("    job: {type: \"two words\"}\n"), "t.yaml:4:17: ", `job.type "two words" must be 1 to 200 characters`},
	{"job type reserved", step1("    job: {type: starflow.x}\n"), "t.yaml:4:17: ", `(and not start with "starflow.")`},
	{"job unknown field", step1("    job: {type: a, queue: b}\n"), "t.yaml:4:20: ", `unknown field "queue" in job; allowed: type, input, timeout, heartbeat_timeout`},
	{"job heartbeat too short", step1("    job: {type: a, heartbeat_timeout: 100ms}\n"), "t.yaml:4:39: ", "job.heartbeat_timeout 100ms is too short: at least 1s"},
	{"job timeout bad", step1("    job: {type: a, timeout: soon}\n"), "t.yaml:4:29: ", `job.timeout: invalid duration "soon"`},
	{"job step timeout", step1("    job: {type: a}\n    timeout: 5s\n"), "t.yaml:5:5: ", "timeout on a job step has no effect"},
	{"job not a mapping", step1("    job: resize\n"), "t.yaml:4:10: ", "job must be a mapping"},
}

func init() {
	for name, src := range jobDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, jobInvalid...)
}
