package main

import (
	"strings"
	"testing"
)

const signalNamesWorkflow = `name: signames
steps:
  - id: gate
    wait: {signal: go}
  - id: branch
    if:
      condition: "${{ true }}"
      then:
        - id: nested
          try:
            steps:
              - id: manager
                wait:
                  approval: {}
            catch:
              - id: finance
                wait:
                  approval: {signal: cfo_ok}
  - id: nap
    wait: {timer: 1s}
`

// TestCLISignalUnknownNameWarns: `signal RUN NAME` with a name no wait step
// of the run's definition listens for (a typo) still holds the signal in
// the inbox and exits 0, but warns on stderr naming the signals the
// definition waits for (nested wait.signal and approval names, the step id
// by default; timers have none). A known name and --correlation-key give no
// warning.
func TestCLISignalUnknownNameWarns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", signalNamesWorkflow)
	if r := starflowCmd(t, dir, nil, "apply", "wf.yaml", "--db", "s.db"); r.code != 0 {
		t.Fatalf("apply: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	enq := starflowCmd(t, dir, nil, "enqueue", "signames", "--db", "s.db")
	if enq.code != 0 {
		t.Fatalf("enqueue: exit %d %s%s", enq.code, enq.stdout, enq.stderr)
	}
	runID := strings.TrimSpace(enq.stdout)

	r := starflowCmd(t, dir, nil, "signal", runID, "og", "--db", "s.db")
	if r.code != 0 || !strings.Contains(r.stdout, "signal og is held in the wake inbox for run "+runID) {
		t.Fatalf("signal with a typo: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	want := `warning: no wait step of run ` + runID + `'s definition signames waits for signal "og"; it waits for: cfo_ok, go, manager`
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr lacks %q:\n%s", want, r.stderr)
	}

	for _, name := range []string{"go", "manager", "cfo_ok"} {
		r := starflowCmd(t, dir, nil, "signal", runID, name, "--db", "s.db")
		if r.code != 0 || !strings.Contains(r.stdout, "held in the wake inbox") || strings.Contains(r.stderr, "warning") {
			t.Errorf("signal %s: exit %d\nstdout %s\nstderr %s", name, r.code, r.stdout, r.stderr)
		}
	}
	r = starflowCmd(t, dir, nil, "signal", "--correlation-key", "k1", "og", "--db", "s.db")
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("signal --correlation-key: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
