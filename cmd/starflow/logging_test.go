package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestWorkerLogsRunsOnATerminal: `starflow worker` with its stderr on a
// terminal and no -v writes text lines, one when each run starts and one
// when it ends, each naming the run, its workflow, its attempt and the
// runner.
func TestWorkerLogsRunsOnATerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	if r := starflowCmd(t, dir, nil, "apply", "three.yaml", "--db", "t.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	var ids []string
	for range 2 {
		r := starflowCmd(t, dir, nil, "enqueue", "three", "--db", "t.db")
		if r.code != 0 {
			t.Fatalf("enqueue: %s", r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	w := exec.Command(binary, "worker", "--db", "t.db", "--poll-interval", "50ms")
	w.Dir, w.Env, w.Stderr = dir, os.Environ(), tty
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the worker holds its own copy
	screen := &syncBuffer{}
	go func() {
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			screen.Write([]byte(sc.Text() + "\n"))
		}
	}()
	stop := func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = w.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = w.Process.Kill()
			<-done
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(screen.String(), `msg="run succeeded"`) < 2 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no end lines for both runs after 30s:\n%s", screen.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	out := screen.String()
	for _, id := range ids {
		for _, msg := range []string{"run started", "run succeeded"} {
			re := regexp.MustCompile(`level=INFO msg="` + msg + `".* run_id=` + id + ` workflow=three attempt=1\b`)
			if n := len(re.FindAllString(out, -1)); n != 1 {
				t.Errorf("%d %q lines for run %s, want 1:\n%s", n, msg, id, out)
			}
		}
	}
	if !regexp.MustCompile(`msg="run started" runner_id=\S+:\d+:[0-9a-f]+ run_id=`).MatchString(out) {
		t.Errorf("the start line does not name the runner:\n%s", out)
	}
	if strings.Contains(out, "level=DEBUG") || strings.Contains(out, `{"time"`) {
		t.Errorf("debug lines or JSON on a terminal without -v:\n%s", out)
	}
}

// TestWorkerLogsJSONNotATerminal: with stderr not on a terminal the
// worker logs JSON lines: step retries with their scope path, a run retry
// and the final failure with the step that failed, and never the value of
// a secret the failing steps sent (echoed in a 503's body) and failed
// with. --log-level warn hides the info lines.
func TestWorkerLogsJSONNotATerminal(t *testing.T) {
	t.Parallel()
	const secret = "log-secret-5d1e8b"
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 4 { // attempt 1: tries 1 and 2; attempt 2: try 1
			http.Error(w, "not yet: "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	defer flaky.Close()
	dir := t.TempDir()
	writeFile(t, dir, "l.yaml", `name: logged
secrets: [SF_LOG_TEST_TOKEN]
max_attempts: 2
steps:
  - id: call
    service_call:
      url: "`+flaky.URL+`"
      headers: {Authorization: "${{ 'Bearer ' + secrets.SF_LOG_TEST_TOKEN }}"}
    retry_policy: {max_attempts: 2, initial_interval: 10ms}
  - id: boom
    fail: {message: "${{ 'the token is ' + secrets.SF_LOG_TEST_TOKEN }}"}
`)
	env := []string{"SF_LOG_TEST_TOKEN=" + secret}
	if r := starflowCmd(t, dir, env, "apply", "l.yaml", "--db", "j.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	r := starflowCmd(t, dir, env, "enqueue", "logged", "--db", "j.db")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 {
		t.Fatalf("enqueue: %s", r.stderr)
	}
	d := startDaemon(t, dir, env, "worker", "--db", "j.db", "--poll-interval", "50ms", "--maintenance=false")
	awaitFailed(t, dir, id)
	d.stop(t)
	out := d.stderr.String()
	if strings.Contains(out, secret) {
		t.Fatalf("the secret is in the logs:\n%s", out)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue // the process's own status lines (started on, stopping)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	find := func(msg string, want map[string]any) int {
		n := 0
	next:
		for _, m := range lines {
			if m["msg"] != msg || m["run_id"] != id || m["workflow"] != "logged" || m["runner_id"] == nil {
				continue
			}
			for k, v := range want {
				if m[k] != v {
					continue next
				}
			}
			n++
		}
		return n
	}
	if n := find("run started", nil); n != 2 {
		t.Errorf("%d run started lines, want 2 (two attempts):\n%s", n, out)
	}
	for _, attempt := range []float64{1, 2} {
		if n := find("step try failed; retrying", map[string]any{"step": "call", "scope_path": "", "attempt": attempt, "try": 1.0}); n != 1 {
			t.Errorf("%d step retry lines of attempt %v, want 1:\n%s", n, attempt, out)
		}
	}
	if n := find("run attempt failed", map[string]any{"step": "call", "retry": true, "attempt": 1.0}); n != 1 {
		t.Errorf("%d run retry lines, want 1:\n%s", n, out)
	}
	if n := find("run attempt failed", map[string]any{"step": "boom", "retry": false, "attempt": 2.0, "status": "failed"}); n != 1 {
		t.Errorf("%d final failure lines, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "the token is ***") {
		t.Errorf("the failure's message is not logged (masked):\n%s", out)
	}

	// --log-level warn: the same kind of run logs no info line.
	r = starflowCmd(t, dir, env, "enqueue", "logged", "--db", "j.db")
	id = strings.TrimSpace(r.stdout)
	q := startDaemon(t, dir, env, "worker", "--db", "j.db", "--poll-interval", "50ms", "--maintenance=false", "--log-level", "warn")
	awaitFailed(t, dir, id)
	q.stop(t)
	if s := q.stderr.String(); strings.Contains(s, `"level":"INFO"`) {
		t.Errorf("info lines at --log-level warn:\n%s", s)
	}
}

// TestLogFlagsRefused: an unknown --log-format or --log-level is a usage
// error (exit 2) naming the flag and what it takes.
func TestLogFlagsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ args, want []string }{
		{[]string{"worker", "--log-format", "xml"}, []string{`--log-format "xml"`, "auto", "text", "json"}},
		{[]string{"runs", "list", "--log-level", "loud"}, []string{`--log-level "loud"`, "debug, info, warn or error"}},
	} {
		r := starflowCmd(t, dir, nil, append(c.args, "--db", "f.db")...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: %q not in %q", c.args, w, r.stderr)
			}
		}
	}
	if _, err := os.Stat(dir + "/f.db"); err == nil {
		t.Error("a refused command line created the database")
	}
}

// awaitFailed waits up to 60 s for run id of j.db in dir to fail.
func awaitFailed(t *testing.T, dir, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "j.db", "--json")
		if strings.Contains(r.stdout, `"status": "failed"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not fail in 60s: %s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
