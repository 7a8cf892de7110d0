package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestCLIResumeRefusalsSayWhatCan: resuming a succeeded run says which
// runs can be resumed, and a run without a checkpoint how to resume it
// (--mode replay, the flag, also through a server), the same words on
// the store and through the server, without a store package's prefix.
func TestCLIResumeRefusalsSayWhatCan(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "three.yaml", threeSteps)
	res := f.local(t, "run", "three.yaml")
	m := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("run: %s %s", res.stdout, res.stderr)
	}
	done := m[1]
	r := f.same(t, true, "runs", "resume", done)
	mustCode(t, "resume a succeeded run", r, 1, "only an interrupted, failed or cancelled run that no runner holds can be resumed (retrigger it")
	if strings.Contains(r.stderr, "sqlitestore") {
		t.Errorf("resume: the store's prefix shows: %s", r.stderr)
	}

	delayed := strings.TrimSpace(f.local(t, "enqueue", "three", "--delay", "1h").stdout)
	if c := f.local(t, "runs", "cancel", delayed); c.code != 0 {
		t.Fatalf("cancel: %d %s", c.code, c.stderr)
	}
	r = f.same(t, true, "runs", "resume", delayed)
	mustCode(t, "resume without a checkpoint", r, 1, "no_checkpoint: run "+delayed+" has no checkpoint to resume from: no step of it committed; resume it with --mode replay")
	if strings.Contains(r.stderr, `"mode"`) {
		t.Errorf("the CLI names the API's body field: %s", r.stderr)
	}
}

// TestCLIKeysNamesAndWorkerRole: keys create refuses a workspace or env
// that is not a name (exit 2, nothing created), and makes a worker key
// through a server as on the store.
func TestCLIKeysNamesAndWorkerRole(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	for _, c := range []struct{ flag, value string }{{"--workspace", "../../x"}, {"--workspace", "a\x1bb"}, {"--workspace", "Team"}, {"--env", "prod/eu"}} {
		args := []string{"keys", "create", "--name", "x", "--role", "viewer", "--workspace", "default"}
		if c.flag == "--workspace" {
			args[len(args)-1] = c.value
		} else {
			args = append(args, c.flag, c.value)
		}
		r := f.local(t, args...)
		mustCode(t, c.flag+" "+c.value, r, exitUsage, c.flag+": "+c.flag[2:]+" ")
		if !strings.Contains(r.stderr, "is not a valid name: use lower-case letters, digits") || r.stdout != "" || strings.Contains(r.stderr, "\x1b") {
			t.Errorf("%s %q: stdout %q, stderr %q", c.flag, c.value, r.stdout, r.stderr)
		}
	}
	var keys []struct{ Name string }
	if l := f.local(t, "keys", "list", "--json"); json.Unmarshal([]byte(l.stdout), &keys) != nil || len(keys) != 3 {
		t.Errorf("keys after the refusals (want the fixture's 3):\n%s%s", l.stdout, l.stderr)
	}
	r := f.remote(t, f.admin, "keys", "create", "--name", "pool-a", "--role", "worker")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "sf_") || !strings.Contains(r.stderr, "role worker in workspace default") {
		t.Fatalf("keys create --role worker through the server: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestCLIEnqueueBoundsOnBothPaths: --priority and --idempotency-key over
// the engine's bounds are refused the same on the store and through a
// server (exit 2, nothing enqueued), and --input that does not parse is a
// usage error too; a refusal only the server makes shows the server's
// detailed reason (the field and the bound), not "validation failed".
func TestCLIEnqueueBoundsOnBothPaths(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "three.yaml", threeSteps)
	f.same(t, true, "apply", "three.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--priority", "99999999999"}, "--priority 99999999999 is out of range: it must be between -1000000 and 1000000"},
		{[]string{"--priority", "-1000001"}, "--priority -1000001 is out of range"},
		{[]string{"--idempotency-key", strings.Repeat("k", 300)}, "the idempotency key is 300 characters long: at most 255 are taken"},
		{[]string{"--input", `{"quantity": 4`}, "--input is not valid JSON: unexpected end of JSON input at line 1, column 15"},
		{[]string{"--input", `[1]`}, "--input must be a JSON object"},
		{[]string{"--input", `{"q": 1e400}`}, "--input: number 1e400 at $.q"},
	} {
		r := f.same(t, true, append([]string{"enqueue", "three"}, c.args...)...)
		mustCode(t, strings.Join(c.args, " "), r, exitUsage, c.want)
	}
	var runs []struct{ ID string }
	if l := f.local(t, "runs", "list", "--json"); json.Unmarshal([]byte(l.stdout), &runs) != nil || len(runs) != 0 {
		t.Errorf("runs after the refusals:\n%s%s", l.stdout, l.stderr)
	}
	for _, ok := range [][]string{{"--priority", "1000000"}, {"--priority", "-1000000"}, {"--idempotency-key", strings.Repeat("k", 255)}} {
		l, r := f.local(t, append([]string{"enqueue", "three"}, ok...)...), f.remote(t, f.admin, append([]string{"enqueue", "three"}, ok...)...)
		sameShape(t, strings.Join(ok, " "), l, r)
		if l.code != 0 {
			t.Errorf("%v: exit %d %s", ok, l.code, l.stderr)
		}
	}

	r := f.remote(t, f.admin, "keys", "create", "--name", strings.Repeat("n", 201), "--role", "viewer")
	mustCode(t, "a key name over the server's bound", r, 1, "validation failed: body.name: expected length <= 200")
}

// TestCLIDurationsTooLarge: --delay and the retention ages say a value
// is too large, with the bound, instead of how to write one.
func TestCLIDurationsTooLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	starflowCmd(t, dir, nil, "apply", "three.yaml", "--db", "d.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "three", "--delay", "99999999h"}, `invalid argument "99999999h" for "--delay" flag: too large: at most 2562047h (about 292 years)`},
		{[]string{"enqueue", "three", "--delay", "soon"}, `invalid argument "soon" for "--delay" flag: not a duration: write it like 500ms, 30s, 5m or 1h30m`},
		{[]string{"enqueue", "three", "--delay", "-5m"}, "--delay -5m0s is out of range: it must be 0s or more"},
		{[]string{"gc", "--retain-succeeded", "99999999d"}, `age "99999999d" is too large: at most 36500d (100 years), or never`},
		{[]string{"gc", "--retain-failed", "7x"}, `invalid age "7x": write it like 7d`},
	} {
		r := starflowCmd(t, dir, nil, append(c.args, "--db", "d.db")...)
		mustCode(t, strings.Join(c.args, " "), r, exitUsage, c.want)
	}
	if r := starflowCmd(t, dir, nil, "enqueue", "three", "--delay", "2562047h", "--db", "d.db"); r.code != 0 {
		t.Errorf("--delay 2562047h: exit %d %s", r.code, r.stderr)
	}
}

// TestCLIValidateSyntaxPositions: validate names a YAML syntax error's
// line (counted from 1, no column: the YAML parser gives none) the same on
// the store and through a server, and a pasted Markdown fence at 1:1.
func TestCLIValidateSyntaxPositions(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "flow.yaml", "name: a\nsteps:\n  - id: x\n    pass: [1, 2\n")
	writeFile(t, f.dir, "fence.yaml", "```yaml\nname: a\nsteps:\n  - id: x\n    pass: 1\n```\n")
	r := f.same(t, true, "validate", "flow.yaml", "fence.yaml")
	mustCode(t, "validate", r, 1, "flow.yaml:4: syntax error: did not find expected ',' or ']'\nfence.yaml:1:1: syntax error: a Markdown code fence")
}

// TestCLIRunsListDeadLetter: runs list --dead-letter lists the failed runs
// whose attempts ran out, and only them, on the store and through a server
// (GET /api/dead-letters); with a --status other than failed it exits 2.
func TestCLIRunsListDeadLetter(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "down.yaml", "name: down\nmax_attempts: 1\nsteps:\n  - id: call\n    timeout: 2s\n    service_call: {url: \"http://127.0.0.1:1/x\"}\n    retry_policy: {max_attempts: 1}\n")
	writeFile(t, f.dir, "stop.yaml", "name: stop\nsteps:\n  - id: stop\n    fail: {message: no}\n")
	writeFile(t, f.dir, "three.yaml", threeSteps)
	for _, file := range []string{"down.yaml", "stop.yaml", "three.yaml"} {
		if r := f.local(t, "run", file); r.code > 1 {
			t.Fatalf("run %s: %d %s", file, r.code, r.stderr)
		}
	}
	var runs []struct {
		WorkflowName string `json:"workflow_name"`
		DeadLettered bool   `json:"dead_lettered"`
	}
	r := f.same(t, true, "runs", "list", "--dead-letter", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil || len(runs) != 1 || runs[0].WorkflowName != "down" || !runs[0].DeadLettered {
		t.Fatalf("runs list --dead-letter: %v %s %s", err, r.stdout, r.stderr)
	}
	f.same(t, true, "runs", "list", "--dead-letter")
	f.same(t, true, "runs", "list", "--dead-letter", "--workflow", "three")
	f.same(t, true, "runs", "list", "--dead-letter", "--status", "failed")
	mustCode(t, "--dead-letter --status succeeded", f.local(t, "runs", "list", "--dead-letter", "--status", "succeeded"), exitUsage, "--dead-letter lists failed runs only")
}
