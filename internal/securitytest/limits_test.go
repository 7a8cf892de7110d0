package securitytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Caps (issue 10 item 7): a definition, an input, a payload, a for_each's
// items and concurrency, a repeat_until's max_iterations and the nesting of
// constructs over their caps are each refused through the real CLI with an
// error naming the cap and how to raise it; raising it (flag or
// environment) lets the same thing through.

// limitsRefused checks a refusal: the exit code, and the message (on
// stderr or stdout) containing each of want.
func limitsRefused(t *testing.T, what string, r cliResult, wantCode int, want ...string) {
	t.Helper()
	if r.code != wantCode {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, wantCode, r.stdout, r.stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(r.stderr+r.stdout, w) {
			t.Errorf("%s: no %q in\nstdout: %s\nstderr: %s", what, w, r.stdout, r.stderr)
		}
	}
}

// bigJSON is a JSON object of more than n bytes.
func bigJSON(n int) string {
	return `{"pad": "` + strings.Repeat("p", n) + `"}`
}

func TestLimitsDefinitionSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "name: big\nsteps:\n  - id: a\n    context_set: {x: 1}\n# " + strings.Repeat("x", 1<<20) + "\n"
	writeFile(t, dir, "big.yaml", src)
	size := len(src)
	for _, args := range [][]string{
		{"validate", "big.yaml"},
		{"apply", "big.yaml", "--db", "s.db"},
		{"run", "big.yaml", "--db", "s.db"},
	} {
		r := runStarflow(t, dir, nil, args...)
		limitsRefused(t, args[0], r, 1, "big.yaml: the definition source ("+limitsItoa(size)+" bytes) exceeds the limit of 1048576 "+
			"(limits.definition_bytes; raise it with --max-definition-bytes, STARFLOW_MAX_DEFINITION_BYTES or starflow.Config.Limits.SourceBytes)")
	}
	if r := runStarflow(t, dir, nil, "validate", "big.yaml", "--max-definition-bytes", "2097152"); r.code != 0 {
		t.Errorf("validate with the cap raised by flag: %s", r)
	}
	if r := runStarflow(t, dir, []string{"STARFLOW_MAX_DEFINITION_BYTES=2097152"}, "apply", "big.yaml", "--db", "s.db"); r.code != 0 {
		t.Errorf("apply with the cap raised by the environment: %s", r)
	}
}

func TestLimitsStaticCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nest := func(depth int) string {
		var b strings.Builder
		b.WriteString("name: deep\nsteps:\n")
		indent := "  "
		for i := range depth {
			b.WriteString(indent + "- id: t" + limitsItoa(i) + "\n" + indent + "  try:\n" + indent + "    steps:\n")
			indent += "      "
		}
		b.WriteString(indent + "- id: leaf\n" + indent + "  context_set: {x: 1}\n")
		return b.String()
	}
	cases := []struct {
		file, src string
		want      string
		raise     []string
	}{
		{"concurrency.yaml", "name: c\nsteps:\n  - id: ship\n    for_each:\n      items: input.xs\n      concurrency: 1000\n      steps: [{id: x, context_set: {v: 1}}]\n",
			"concurrency.yaml:6:20: for_each ship: concurrency 1000 exceeds the limit of 64 (limits.for_each_concurrency; raise it with --max-for-each-concurrency, STARFLOW_MAX_FOR_EACH_CONCURRENCY or starflow.Config.Limits.ForEachConcurrency)",
			[]string{"--max-for-each-concurrency", "1000"}},
		{"iterations.yaml", "name: i\nsteps:\n  - id: poll\n    repeat_until:\n      steps: [{id: x, context_set: {v: 1}}]\n      until: false\n      max_iterations: 1000000\n",
			"iterations.yaml:7:23: repeat_until poll: max_iterations 1000000 exceeds the limit of 10000 (limits.max_iterations; raise it with --max-iterations, STARFLOW_MAX_ITERATIONS or starflow.Config.Limits.MaxIterations)",
			[]string{"--max-iterations", "1000000"}},
		{"deep.yaml", nest(33), "(limits.nesting_depth; raise it with --max-nesting-depth, STARFLOW_MAX_NESTING_DEPTH or starflow.Config.Limits.NestingDepth)",
			[]string{"--max-nesting-depth", "40"}},
	}
	for _, c := range cases {
		writeFile(t, dir, c.file, c.src)
		for _, cmd := range [][]string{{"validate", c.file}, {"apply", c.file, "--db", "s.db"}} {
			r := runStarflow(t, dir, nil, cmd...)
			limitsRefused(t, cmd[0]+" "+c.file, r, 1, c.want)
		}
		if r := runStarflow(t, dir, nil, append([]string{"validate", c.file}, c.raise...)...); r.code != 0 {
			t.Errorf("validate %s %v: %s", c.file, c.raise, r)
		}
	}
	if !regexp.MustCompile(`deep\.yaml:\d+:\d+: control flow nests more than 32 constructs deep`).MatchString(func() string {
		return runStarflow(t, dir, nil, "validate", "deep.yaml").stderr
	}()) {
		t.Error("the nesting refusal names no file:line:col")
	}
}

func TestLimitsInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: echo\nsteps:\n  - id: a\n    context_set: {x: \"${{ input }}\"}\n")
	big := bigJSON(1 << 20)
	writeFile(t, dir, "big.json", big)
	if r := runStarflow(t, dir, nil, "apply", "wf.yaml", "--db", "s.db"); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	want := "big.json: the run input (" + limitsItoa(len(big)) + " bytes as JSON) exceeds the limit of 1048576 " +
		"(limits.input_bytes; raise it with --max-input-bytes, STARFLOW_MAX_INPUT_BYTES or starflow.Config.Limits.InputBytes)"
	r := runStarflow(t, dir, nil, "enqueue", "echo", "--input", "@big.json", "--db", "s.db")
	limitsRefused(t, "enqueue", r, 2, want)
	r = runStarflow(t, dir, nil, "run", "wf.yaml", "--input", "@big.json", "--db", "s.db")
	limitsRefused(t, "run", r, 2, want)
	if r := runStarflow(t, dir, nil, "runs", "list", "--db", "s.db", "--json"); strings.Contains(r.stdout, `"id"`) {
		t.Fatalf("a refused input created a run: %s", r.stdout)
	}
	// Raised, the same input goes through.
	r = runStarflow(t, dir, []string{"STARFLOW_MAX_INPUT_BYTES=4194304"}, "enqueue", "echo", "--input", "@big.json", "--db", "s.db")
	if r.code != 0 || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("enqueue with the cap raised: %s", r)
	}
}

func TestLimitsForEach(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "many.yaml", `name: many
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(input.n) }}"
      steps: [{id: x, context_set: {v: "${{ item }}"}}]
`)
	r := runStarflow(t, dir, nil, "run", "many.yaml", "--input", `{"n": 10001}`, "--db", "s.db")
	limitsRefused(t, "run 10001 items", r, 1,
		"for_each ship: 10001 items exceed the limit of 10000 (limits.for_each_items; raise it with --max-for-each-items, STARFLOW_MAX_FOR_EACH_ITEMS or starflow.Config.Limits.ForEachItems)")
	if strings.Contains(r.stdout, "✓ ship.item_0/x") {
		t.Errorf("an item ran before the cap was checked:\n%s", r.stdout)
	}
	r = runStarflow(t, dir, []string{"STARFLOW_MAX_FOR_EACH_ITEMS=5"}, "run", "many.yaml", "--input", `{"n": 6}`, "--db", "s.db")
	limitsRefused(t, "run 6 items over an env cap of 5", r, 1, "for_each ship: 6 items exceed the limit of 5 (limits.for_each_items")
	if r := runStarflow(t, dir, nil, "run", "many.yaml", "--input", `{"n": 6}`, "--max-for-each-items", "6", "--db", "s.db"); r.code != 0 {
		t.Errorf("run 6 items at a cap of 6: %s", r)
	}
}

// TestLimitsPayload: a wake or signal payload over the cap is refused by
// `starflow wake`, `starflow signal` and POST /wake/{token} of `starflow
// dev` (413), and the token is not spent: the same token then wakes the
// run with a payload within the cap.
func TestLimitsPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "wf.yaml", "name: waiting\nsteps:\n  - id: w\n    wait: {signal: go, notify: {url: \""+sink.srv.URL+"\"}}\n")
	big := bigJSON(1 << 20)
	writeFile(t, dir, "big.json", big)
	runID := applyAndEnqueue(t, dir, "wf.yaml", "waiting", "p.db")

	dev := startListener(t, dir, nil, "dev", "--db", "p.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms")
	tok := sink.token(t)
	base := dev.base

	want := "exceeds the limit of 1048576 (limits.payload_bytes; raise it with --max-payload-bytes, STARFLOW_MAX_PAYLOAD_BYTES or starflow.Config.Limits.PayloadBytes)"
	r := runStarflow(t, dir, nil, "wake", tok, "--payload", "@big.json", "--db", "p.db")
	limitsRefused(t, "wake", r, 2, "payload file big.json: the payload ("+limitsItoa(len(big))+" bytes as JSON) "+want)
	r = runStarflow(t, dir, nil, "signal", runID, "go", "--payload", "@big.json", "--db", "p.db")
	limitsRefused(t, "signal", r, 2, want)

	resp, err := http.Post(base+"/wake/"+tok, "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "(limits.payload_bytes; raise it with --max-payload-bytes") {
		t.Fatalf("POST /wake over the cap: %d %s", resp.StatusCode, body)
	}

	// Nothing was spent: the token wakes the run (a stored "go" signal
	// would have woken the wait already, and the token would be refused).
	if r := runStarflow(t, dir, nil, "wake", tok, "--payload", `{"ok": true}`, "--db", "p.db"); r.code != 0 {
		t.Fatalf("the refused wakes spent the token: %s", r)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		o := runStarflow(t, dir, nil, "runs", "show", runID, "--db", "p.db", "--json").stdout
		var run struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal([]byte(o), &run)
		if run.Status == "succeeded" {
			var compact bytes.Buffer
			if err := json.Compact(&compact, run.Output); err != nil || compact.String() != `{"ok":true}` {
				t.Fatalf("output %s", run.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not woken: %s", o)
		}
	}
}

func limitsItoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// listRuns is `starflow runs list --json` of the SQLite file db.
func listRuns(t *testing.T, dir, db string) []map[string]any {
	t.Helper()
	r := runStarflow(t, dir, nil, "runs", "list", "--db", db, "--json", "--limit", "1000")
	var runs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("runs list: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return runs
}

// TestLimitsChildDepth: a workflow that calls itself (a new user's
// `recurse`) is valid, with a warning from `starflow validate`, and stops
// at the cap on nesting, 32 child runs below its root, with an error
// naming the cap; the flag and the environment variable set the cap.
func TestLimitsChildDepth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "recurse.yaml", "name: recurse\nsteps:\n  - id: me\n    workflow_call: {workflow: recurse}\n")
	// Valid, with a warning.
	if r := runStarflow(t, dir, nil, "validate", "recurse.yaml"); r.code != 0 ||
		!strings.Contains(r.stderr, "recurse.yaml:3:5: warning: step me calls workflow recurse, its own, on every run: each run would start another until the cap on child-run depth (limits.child_depth, 32 by default) fails the deepest") {
		t.Fatalf("validate: %s", r)
	}
	r := runStarflow(t, dir, nil, "run", "recurse.yaml", "--db", "s.db")
	limitsRefused(t, "run recurse", r, 1,
		"the child run of recurse would be at depth 33 (this run is 32 workflow_calls below its root run), which exceeds the limit of 32 (limits.child_depth; raise it with --max-child-depth, STARFLOW_MAX_CHILD_DEPTH or starflow.Config.Limits.ChildDepth)")
	if n := len(listRuns(t, dir, "s.db")); n != 33 {
		t.Errorf("%d runs, want the root and 32 children", n)
	}
	r = runStarflow(t, dir, nil, "run", "recurse.yaml", "--db", "f.db", "--max-child-depth", "2")
	limitsRefused(t, "run recurse --max-child-depth 2", r, 1, "would be at depth 3 (this run is 2 workflow_calls below its root run), which exceeds the limit of 2 (limits.child_depth")
	r = runStarflow(t, dir, []string{"STARFLOW_MAX_CHILD_DEPTH=1"}, "run", "recurse.yaml", "--db", "e.db")
	limitsRefused(t, "run recurse with STARFLOW_MAX_CHILD_DEPTH=1", r, 1, "would be at depth 2 (this run is 1 workflow_call below its root run), which exceeds the limit of 1 (limits.child_depth")
	if n := len(listRuns(t, dir, "e.db")); n != 2 {
		t.Errorf("%d runs under a cap of 1, want 2", n)
	}
}

// TestCancelRunawayTree: `starflow runs cancel ROOT` stops a tree of
// child runs deeper than the 64 levels the cancel cascade once refused
// (the cap raised to let it grow), every run of it, with nothing parked
// left behind.
func TestCancelRunawayTree(t *testing.T) {
	t.Parallel()
	const depth = 70
	dir := t.TempDir()
	writeFile(t, dir, "deep.yaml", `name: deep
steps:
  - id: down
    when: "${{ input.n > 0 }}"
    workflow_call: {workflow: deep, input: {n: "${{ input.n - 1 }}"}}
  - id: hold
    wait: {signal: go}
`)
	if r := runStarflow(t, dir, nil, "apply", "deep.yaml", "--db", "d.db"); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	r := runStarflow(t, dir, nil, "enqueue", "deep", "--input", `{"n": `+limitsItoa(depth)+`}`, "--db", "d.db")
	if r.code != 0 {
		t.Fatalf("enqueue: %s", r)
	}
	root := strings.TrimSpace(r.stdout)
	startListener(t, dir, nil, "dev", "--db", "d.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms", "--max-child-depth", "100")
	count := func(status string) (n, total int) {
		runs := listRuns(t, dir, "d.db")
		for _, r := range runs {
			if r["status"] == status {
				n++
			}
		}
		return n, len(runs)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// Every run parked: the deepest at its wait, the others at their
		// workflow_call.
		if n, _ := count("paused"); n == depth+1 {
			break
		}
		if time.Now().After(deadline) {
			n, total := count("paused")
			t.Fatalf("%d of %d runs paused, want %d", n, total, depth+1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := runStarflow(t, dir, nil, "runs", "cancel", root, "--db", "d.db"); r.code != 0 || strings.Contains(r.stdout+r.stderr, "sqlitestore") {
		t.Fatalf("runs cancel of the root of a tree %d deep: %s", depth, r)
	}
	if n, total := count("cancelled"); n != depth+1 || total != depth+1 {
		t.Errorf("%d of %d runs cancelled, want all %d", n, total, depth+1)
	}
}
