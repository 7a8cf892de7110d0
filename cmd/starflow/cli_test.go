package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

const threeSteps = `name: three
steps:
  - id: a
    context_set: {x: "${{ has(input.n) ? input.n : 1 }}"}
  - id: b
    when: "${{ variables.x > 100 }}"
    context_set: {big: true}
  - id: c
    context_set: {y: "${{ variables.x * 2 }}"}
output: "${{ variables.y }}"
`

func TestCLIRunAndInspect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	res := starflowCmd(t, dir, nil, "run", "three.yaml", "--input", `{"n": 21}`, "--db", "runs.db")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	m := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("no run id in output:\n%s", res.stdout)
	}
	id := m[1]
	for _, want := range []string{"✓ a", "– b", "skipped", "✓ c", "output: 42"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, res.stdout)
		}
	}

	ledger := starflowCmd(t, dir, nil, "runs", "ledger", id, "--db", "runs.db", "--json")
	if ledger.code != 0 {
		t.Fatalf("ledger: %s", ledger.stderr)
	}
	var l struct {
		Steps []struct {
			StepID string `json:"step_id"`
			Status string `json:"status"`
			Tries  int    `json:"tries"`
		} `json:"steps"`
		Checkpoints []json.RawMessage `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(ledger.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Steps) != 3 || l.Steps[1].Status != "skipped" || l.Steps[0].Tries != 1 || len(l.Checkpoints) != 2 {
		t.Fatalf("ledger %+v, %d checkpoints", l.Steps, len(l.Checkpoints))
	}
	table := starflowCmd(t, dir, nil, "runs", "ledger", id, "--db", "runs.db")
	if !strings.Contains(table.stdout, "checkpoints: 2 (succeeded steps: 2)") {
		t.Fatalf("ledger table:\n%s", table.stdout)
	}

	for _, sub := range [][]string{{"runs", "list"}, {"runs", "show", id}, {"runs", "events", id}} {
		r := starflowCmd(t, dir, nil, append(sub, "--db", "runs.db")...)
		if r.code != 0 || !strings.Contains(r.stdout, id[:8]) && sub[1] != "events" {
			t.Errorf("%v: exit %d\n%s%s", sub, r.code, r.stdout, r.stderr)
		}
	}
	evs := starflowCmd(t, dir, nil, "runs", "events", id, "--db", "runs.db", "--json")
	var events []struct {
		ID   int64  `json:"id"`
		Type string `json:"event_type"`
	}
	if err := json.Unmarshal([]byte(evs.stdout), &events); err != nil {
		t.Fatal(err)
	}
	if events[0].Type != "run_queued" || events[len(events)-1].Type != "run_succeeded" {
		t.Fatalf("events %+v", events)
	}
	for i := 1; i < len(events); i++ {
		if events[i].ID <= events[i-1].ID {
			t.Fatal("events out of order")
		}
	}

	// STARFLOW_DB selects the same file.
	r := starflowCmd(t, dir, []string{"STARFLOW_DB=runs.db"}, "runs", "show", id, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"status": "succeeded"`) {
		t.Fatalf("STARFLOW_DB: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestCLIFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "fails.yaml", "name: fails\nsteps:\n  - id: stop\n    fail: {message: out of stock}\n")
	writeFile(t, dir, "bad.yaml", "name: bad\nsteps:\n  - id: a\n    context_set: {x: 1}\n    colour: red\n")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "fails.yaml", "--db", "x.db"}, 1, "out of stock"},
		{[]string{"validate", "bad.yaml"}, 1, "bad.yaml:5:5"},
		{[]string{"run", "bad.yaml", "--db", "x.db"}, 1, "bad.yaml:5:5"},
		{[]string{"run", "missing.yaml"}, 1, "cannot read missing.yaml"},
		{[]string{"run", "fails.yaml", "--input", "{nope", "--db", "x.db"}, 2, "--input is not valid JSON"}, // a flag value that does not parse: exit 2
		{[]string{"runs", "show", "no-such-run", "--db", "x.db"}, 1, `no run with id "no-such-run"`},
		{[]string{"runs", "list", "--db", "typo.db"}, 1, "no Starflow database at typo.db"},
		{[]string{"runs", "list", "--store", "mysql://x"}, 1, "unknown scheme"},
	}
	for _, c := range cases {
		r := starflowCmd(t, dir, nil, c.args...)
		all := r.stdout + r.stderr
		if r.code != c.code || !strings.Contains(all, c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, r.code, c.code, c.want, all)
		}
		if strings.Contains(all, "goroutine ") || strings.Contains(all, "panic") {
			t.Errorf("%v: stack trace in output:\n%s", c.args, all)
		}
	}
}

func TestCLIMissingSecretFailsBeforeEnqueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "s.yaml", "name: s\nsecrets: [STARFLOW_TEST_NO_SUCH_SECRET]\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	r := starflowCmd(t, dir, nil, "run", "s.yaml", "--db", "s.db")
	if r.code != 1 || !strings.Contains(r.stderr, "needs secret STARFLOW_TEST_NO_SUCH_SECRET") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	list := starflowCmd(t, dir, nil, "runs", "list", "--db", "s.db", "--json")
	if strings.TrimSpace(list.stdout) != "[]" {
		t.Fatalf("a run was enqueued: %s", list.stdout)
	}
}

// TestCLIRunExecutesOnlyItsOwnRun: other queued runs in the same store are
// left for workers.
func TestCLIRunExecutesOnlyItsOwnRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	starflowCmd(t, dir, nil, "apply", "three.yaml", "--db", "o.db")
	other := strings.TrimSpace(starflowCmd(t, dir, nil, "enqueue", "three", "--db", "o.db").stdout)
	if r := starflowCmd(t, dir, nil, "run", "three.yaml", "--db", "o.db"); r.code != 0 {
		t.Fatalf("run: %s", r.stderr)
	}
	r := starflowCmd(t, dir, nil, "runs", "show", other, "--db", "o.db", "--json")
	if !strings.Contains(r.stdout, `"status": "queued"`) || !strings.Contains(r.stdout, `"lease_epoch": 0`) {
		t.Fatalf("the other run was touched:\n%s", r.stdout)
	}
}

func TestCLIOperatorActions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "m.yaml", "name: m\nrecovery_mode: manual\nsteps:\n  - id: a\n    context_set: {x: 1}\n  - id: b\n    fail: {message: stop here}\n")
	res := starflowCmd(t, dir, nil, "run", "m.yaml", "--db", "m.db")
	id := regexp.MustCompile(`run ([0-9a-f-]{36}) failed`).FindStringSubmatch(res.stdout)
	if id == nil {
		t.Fatalf("run: %s %s", res.stdout, res.stderr)
	}
	r := starflowCmd(t, dir, nil, "runs", "resume", id[1], "--db", "m.db")
	if r.code != 0 || !strings.Contains(r.stdout, "is queued (attempt 2)") {
		t.Fatalf("resume: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = starflowCmd(t, dir, nil, "runs", "cancel", id[1], "--db", "m.db")
	if r.code != 0 || !strings.Contains(r.stdout, "is cancelled") {
		t.Fatalf("cancel: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = starflowCmd(t, dir, nil, "runs", "cancel", id[1], "--db", "m.db")
	if r.code != 1 || !strings.Contains(r.stderr, "already ended cancelled") {
		t.Fatalf("second cancel: %d %s", r.code, r.stderr)
	}
	r = starflowCmd(t, dir, nil, "runs", "retrigger", id[1], "--db", "m.db")
	if r.code != 0 || !strings.Contains(r.stdout, "is queued (attempt 3)") {
		t.Fatalf("retrigger: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
