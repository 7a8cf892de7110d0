package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCLIEnumFlagsRefused (issue 10 item 13): a value outside an enum
// flag's values, and a flag that does not parse, exit 2 before anything is
// opened or written, naming the flag, the value and every valid value; a
// valid --status filters.
func TestCLIEnumFlagsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: enums\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	r := starflowCmd(t, dir, nil, "run", "wf.yaml", "--db", "runs.db")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(r.stdout)
	if id == nil {
		t.Fatalf("no run id in %s", r.stdout)
	}
	statuses := "queued, running, paused, succeeded, failed, interrupted, cancelled"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "list", "--status", "done", "--db", "runs.db"}, `--status "done" is not a valid value: use one of ` + statuses},
		{[]string{"runs", "list", "--status", "succeeded,Failed", "--db", "runs.db"}, `--status "Failed" is not a valid value: use one of ` + statuses},
		{[]string{"runs", "list", "--status", "done", "--db", "absent.db"}, `--status "done"`},
		{[]string{"run", "wf.yaml", "--db", "fresh.db", "--recovery-mode", "retry"}, `--recovery-mode "retry" is not a valid value: use one of replay, resume, manual`},
		{[]string{"enqueue", "enums", "--db", "fresh.db", "--recovery-mode", "Resume"}, `--recovery-mode "Resume" is not a valid value: use one of replay, resume, manual`},
		{[]string{"runs", "resume", id[1], "--db", "runs.db", "--mode", "manual"}, `--mode "manual" is not a valid value: use one of resume, replay`},
		{[]string{"runs", "resume", id[1], "--db", "runs.db", "--revision", "latest"}, `--revision "latest" is not a valid value: use one of pinned, current`},
		{[]string{"worker", "--db", "fresh.db", "--warm", "redis://x"}, `--warm "redis://x" is not a valid value: use one of memory, embedded, nats://HOST:PORT`},
		{[]string{"runs", "live", id[1], "--warm", "redis://x"}, `--warm "redis://x" is not a valid value: use one of embedded, nats://HOST:PORT`},
		{[]string{"runs", "list", "--db", "runs.db", "--limit", "ten"}, `invalid argument "ten" for "--limit" flag`},
		{[]string{"runs", "list", "--db", "runs.db", "--json=maybe"}, `invalid argument "maybe" for "--json" flag`},
		{[]string{"runs", "list", "--db", "runs.db", "--colour"}, `unknown flag: --colour (see starflow runs list --help)`},
	} {
		r := starflowCmd(t, dir, nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("starflow %s: exit %d, stdout %q, stderr %q; want exit 2, no output and %q",
				strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
	// Refused before the store was opened: no database was created.
	if _, err := os.Stat(filepath.Join(dir, "fresh.db")); !os.IsNotExist(err) {
		t.Errorf("fresh.db exists after refused command lines (%v)", err)
	}
	// The run is still succeeded: nothing was resumed.
	show := starflowCmd(t, dir, nil, "runs", "show", id[1], "--db", "runs.db", "--json")
	if !strings.Contains(show.stdout, `"status": "succeeded"`) || !strings.Contains(show.stdout, `"attempt": 1`) {
		t.Errorf("run after refused resumes: %s", show.stdout)
	}

	for _, c := range []struct {
		status string
		want   bool
	}{{"succeeded", true}, {"failed,succeeded", true}, {"failed", false}} {
		r := starflowCmd(t, dir, nil, "runs", "list", "--status", c.status, "--db", "runs.db")
		if r.code != 0 || strings.Contains(r.stdout, id[1]) != c.want {
			t.Errorf("runs list --status %s: exit %d, stdout %q; want the run listed: %v", c.status, r.code, r.stdout, c.want)
		}
	}
}

// TestCLIDurationOfCurrentAttempt (issue 10 item 13): a run whose first
// attempt failed after a 1 s timer and that was resumed reports the
// duration of its second attempt; started_at keeps the first start and
// attempt_started_at is the second attempt's.
func TestCLIDurationOfCurrentAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "slow.yaml", `name: slowfirst
steps:
  - id: nap
    wait: {timer: 1s}
  - id: boom
    when: "${{ run.attempt == 1 }}"
    fail: {message: the first attempt fails}
`)
	r := starflowCmd(t, dir, nil, "run", "slow.yaml", "--db", "d.db", "--recovery-mode", "resume")
	m := regexp.MustCompile(`run ([0-9a-f-]{36}) failed`).FindStringSubmatch(r.stdout + r.stderr)
	if r.code != 1 || m == nil {
		t.Fatalf("run: exit %d, want 1 (failed)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := m[1]
	if r := starflowCmd(t, dir, nil, "runs", "resume", id, "--db", "d.db"); r.code != 0 {
		t.Fatalf("runs resume: exit %d\n%s", r.code, r.stderr)
	}
	w := startDaemon(t, dir, nil, "worker", "--db", "d.db", "--poll-interval", "50ms")
	defer w.stop(t)
	var run struct {
		Status           string    `json:"status"`
		Attempt          int       `json:"attempt"`
		StartedAt        time.Time `json:"started_at"`
		AttemptStartedAt time.Time `json:"attempt_started_at"`
		CompletedAt      time.Time `json:"completed_at"`
		DurationMS       int64     `json:"duration_ms"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		show := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "d.db", "--json")
		if err := json.Unmarshal([]byte(show.stdout), &run); err != nil {
			t.Fatalf("runs show --json: %v\n%s", err, show.stdout)
		}
		if run.Status == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed run did not succeed: %s", show.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if run.Attempt != 2 || run.AttemptStartedAt.Sub(run.StartedAt) < time.Second {
		t.Fatalf("run %+v: want attempt 2 started at least 1 s (the first attempt's timer) after the first start", run)
	}
	want := run.CompletedAt.Sub(run.AttemptStartedAt).Milliseconds()
	if d := run.DurationMS - want; d < -1 || d > 1 {
		t.Errorf("duration_ms %d, want completed_at − attempt_started_at = %d", run.DurationMS, want)
	}
	if whole := run.CompletedAt.Sub(run.StartedAt); time.Duration(run.DurationMS)*time.Millisecond >= whole-time.Second {
		t.Errorf("duration_ms %d includes the first attempt (%s since the first start)", run.DurationMS, whole)
	}
	table := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "d.db")
	if !strings.Contains(table.stdout, "attempt_started_at:") {
		t.Errorf("runs show lacks attempt_started_at:\n%s", table.stdout)
	}
}
