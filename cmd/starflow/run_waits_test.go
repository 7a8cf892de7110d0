package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// runProc is a `starflow run` process whose stdout is read line by line.
type runProc struct {
	cmd    *exec.Cmd
	lines  chan string
	out    strings.Builder // every stdout line read so far (read by the test goroutine)
	stderr strings.Builder
	done   chan error
}

func startRun(t *testing.T, dir string, args ...string) *runProc {
	t.Helper()
	p := &runProc{lines: make(chan string, 100), done: make(chan error, 1)}
	p.cmd = exec.Command(binary, append([]string{"run"}, args...)...)
	p.cmd.Dir = dir
	p.cmd.Env = os.Environ()
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(p.lines)
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// until reads lines until one matches re and returns its submatches.
func (p *runProc) until(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("starflow run ended before a line matching %s:\n%s%s", re, p.out.String(), p.stderr.String())
			}
			p.out.WriteString(l + "\n")
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s within 60 s:\n%s", re, p.out.String())
		}
	}
}

// wait reads the rest of stdout and returns the exit code.
func (p *runProc) wait(t *testing.T) int {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if ok {
				p.out.WriteString(l + "\n")
				continue
			}
			err := p.cmd.Wait()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return 0
		case <-deadline:
			t.Fatalf("starflow run did not end within 60 s:\n%s", p.out.String())
		}
	}
}

const parkingWorkflow = `name: parking
steps:
  - id: a
    context_set: {x: 1}
  - id: approve
    wait:
      signal: manager_approval
      timeout: 72h
  - id: nap
    wait: {timer: 1s}
  - id: slow-answer
    wait:
      signal: never_sent
      timeout: 1s
output: "${{ {'approval': steps.approve.output, 'late': steps['slow-answer'].output} }}"
`

// TestCLIRunParksAndContinues: `starflow run` on a workflow reaching a
// signal wait prints the step, the signal and the exact command that wakes
// it, keeps waiting, and continues when that command is run from another
// process; a timer and a wait timeout then fire under `run` alone (its own
// timer poller), and the run ends with the signal's payload.
func TestCLIRunParksAndContinues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", parkingWorkflow)
	p := startRun(t, dir, "wf.yaml", "--db", "p.db")
	p.until(t, regexp.MustCompile(`⏸ approve\s+paused\s+waiting for signal manager_approval, timing out at `))
	m := p.until(t, regexp.MustCompile(`wake it: starflow (signal (\S+) manager_approval --payload '\{\}' --db p\.db)$`))
	runID := m[2]
	args := strings.Fields(strings.Replace(m[1], "'{}'", `{"approved":true}`, 1))
	if r := starflowCmd(t, dir, nil, args...); r.code != 0 || !strings.Contains(r.stdout, "woke wait") {
		t.Fatalf("the printed command %q: exit %d %s%s", m[1], r.code, r.stdout, r.stderr)
	}
	p.until(t, regexp.MustCompile(`✓ approve\s+succeeded`))
	p.until(t, regexp.MustCompile(`⏸ nap\s+paused\s+waiting for timer until `))
	p.until(t, regexp.MustCompile(`✓ nap\s+succeeded`))
	p.until(t, regexp.MustCompile(`⏸ slow-answer\s+paused\s+waiting for signal never_sent, timing out at `))
	p.until(t, regexp.MustCompile(`✓ slow-answer\s+succeeded`))
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, p.out.String(), p.stderr.String())
	}
	if !strings.Contains(p.out.String(), `output: {"approval":{"approved":true},"late":{"timed_out":true}}`) ||
		!strings.Contains(p.out.String(), "run "+runID+" succeeded") {
		t.Fatalf("output:\n%s", p.out.String())
	}
}

// TestCLIRunInterruptWhilePaused: Ctrl-C of `starflow run` whose run is
// parked says where it is paused and for what, that it holds no lease, and
// how to wake and continue it (not "its lease was released"); the run
// stays paused and parked.
func TestCLIRunInterruptWhilePaused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", parkingWorkflow)
	p := startRun(t, dir, "wf.yaml", "--db", "i.db")
	m := p.until(t, regexp.MustCompile(`wake it: starflow signal (\S+) manager_approval`))
	runID := m[1]
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 130 {
		t.Fatalf("exit %d, want 130:\n%s%s", code, p.out.String(), p.stderr.String())
	}
	out, errText := p.out.String(), p.stderr.String()
	if !strings.Contains(out, "run "+runID+" is paused at step approve waiting for signal manager_approval") ||
		!strings.Contains(out, "it holds no lease") ||
		!strings.Contains(out, "approve: wake it: starflow signal "+runID+" manager_approval --payload '{}' --db i.db") {
		t.Fatalf("stdout:\n%s", out)
	}
	if !strings.Contains(errText, "stays paused at step approve") || !strings.Contains(errText, "starflow dev --db i.db") ||
		strings.Contains(out+errText, "lease was released") {
		t.Fatalf("stderr:\n%s", errText)
	}
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "i.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.GetRun(context.Background(), &state.GetRunParams{ID: runID})
	if err != nil || r.Status != starflowtype.RunPaused || r.ClaimState != starflowtype.ClaimParked {
		t.Fatalf("run after interrupt: %+v %v", r, err)
	}
}

// TestCLIRunChildRuns: `starflow run` of a parent whose workflow_call
// starts a child that starts a grandchild runs all three in its process
// (they used to stay queued for ever) and ends with the grandchild's
// output passed up. (The parent's "⏸ call … waiting for child run" line
// is shown only when the poll sees the wait before the child ends.)
func TestCLIRunChildRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "child.yaml", `name: child
steps:
  - id: double
    context_set: {n: "${{ input.n * 2 }}"}
  - id: grand
    workflow_call: {workflow: grandchild, input: {n: "${{ variables.n }}"}}
output: "${{ steps.grand.output }}"
`)
	writeFile(t, dir, "grandchild.yaml", "name: grandchild\nsteps:\n  - id: inc\n    context_set: {n: \"${{ input.n + 1 }}\"}\noutput: \"${{ variables }}\"\n")
	writeFile(t, dir, "parent.yaml", "name: parent\nsteps:\n  - id: call\n    workflow_call: {workflow: child, input: {n: 20}}\noutput: \"${{ steps.call.output }}\"\n")
	for _, f := range []string{"child.yaml", "grandchild.yaml"} {
		if r := starflowCmd(t, dir, nil, "apply", f, "--db", "c.db"); r.code != 0 {
			t.Fatalf("apply %s: %s", f, r.stderr)
		}
	}
	p := startRun(t, dir, "parent.yaml", "--db", "c.db")
	p.until(t, regexp.MustCompile(`✓ call\s+succeeded`))
	if code := p.wait(t); code != 0 || !strings.Contains(p.out.String(), `output: {"n":41}`) {
		t.Fatalf("exit %d:\n%s%s", code, p.out.String(), p.stderr.String())
	}
	r := starflowCmd(t, dir, nil, "runs", "list", "--db", "c.db", "--status", "succeeded")
	for _, wf := range []string{"parent", "child", "grandchild"} {
		if !regexp.MustCompile(`(?m)^\S+\s+` + wf + `\s+succeeded`).MatchString(r.stdout) {
			t.Fatalf("no succeeded %s run:\n%s", wf, r.stdout)
		}
	}
}

// TestCLIPausedRunGuidance: for a run paused at a signal wait, `runs show`
// says which step waits for what since when, and `runs resume` (either
// mode) and `runs retrigger` refuse with where it waits and how to wake or
// cancel it — exit 1, no store internals, nothing changed.
func TestCLIPausedRunGuidance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", parkingWorkflow)
	p := startRun(t, dir, "wf.yaml", "--db", "g.db")
	runID := p.until(t, regexp.MustCompile(`wake it: starflow signal (\S+) manager_approval`))[1]
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 130 {
		t.Fatalf("exit %d:\n%s%s", code, p.out.String(), p.stderr.String())
	}
	show := starflowCmd(t, dir, nil, "runs", "show", runID, "--db", "g.db")
	if !regexp.MustCompile(`(?m)^claim_state:\s+parked\nwaiting:\s+step approve: signal manager_approval, timing out at \S+ \S+, since \d{4}-`).MatchString(show.stdout) {
		t.Fatalf("runs show:\n%s%s", show.stdout, show.stderr)
	}
	for _, args := range [][]string{{"resume"}, {"resume", "--mode", "replay"}, {"retrigger"}} {
		r := starflowCmd(t, dir, nil, append(append([]string{"runs"}, args...), runID, "--db", "g.db")...)
		want := "starflow: run " + runID + " is paused at step approve waiting for signal manager_approval"
		if r.code != 1 || !strings.HasPrefix(r.stderr, want) ||
			!strings.Contains(r.stderr, "wake it: starflow signal "+runID+" manager_approval --payload '{}' --db g.db") ||
			!strings.Contains(r.stderr, "or cancel it: starflow runs cancel "+runID+" --db g.db") ||
			strings.Contains(r.stderr, "store:") || strings.Contains(r.stderr, "conflict") || strings.Contains(r.stderr, "no_checkpoint") {
			t.Errorf("runs %s: exit %d, stderr %q; want exit 1 and %q…", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
	after := starflowCmd(t, dir, nil, "runs", "show", runID, "--db", "g.db", "--json")
	if !strings.Contains(after.stdout, `"status": "paused"`) || !strings.Contains(after.stdout, `"attempt": 1,`) {
		t.Fatalf("the refused actions changed the run:\n%s", after.stdout)
	}
	if r := starflowCmd(t, dir, nil, "runs", "cancel", runID, "--db", "g.db"); r.code != 0 || !strings.Contains(r.stdout, "is cancelled") {
		t.Fatalf("cancel of the paused run: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	again := starflowCmd(t, dir, nil, "runs", "cancel", runID, "--db", "g.db")
	if again.code != 1 || again.stderr != "starflow: run "+runID+" already ended cancelled\n" {
		t.Fatalf("cancel of a cancelled run: exit %d %q", again.code, again.stderr)
	}
}
