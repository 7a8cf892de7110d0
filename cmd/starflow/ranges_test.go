package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCLINumericFlagsOutOfRangeRefused: a negative delay, a zero
// concurrency or poll interval, and every other numeric flag outside its
// range exit 2 before anything is opened, naming the flag, the value and
// the valid range; --db with --store is refused the same way. Values at
// the edge of a range are accepted.
func TestCLINumericFlagsOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := []string{"--db", "fresh.db"}
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"enqueue", "wf", "--delay", "-5m"}, nil, "--delay -5m0s is out of range: it must be 0s or more (0s makes the run available at once)"},
		{[]string{"worker", "--concurrency", "0"}, nil, "--concurrency 0 is out of range: it must be 1 or more"},
		{[]string{"worker", "--concurrency", "-3"}, nil, "--concurrency -3 is out of range: it must be 1 or more"},
		{[]string{"worker", "--poll-interval", "0"}, nil, "--poll-interval 0s is out of range: it must be more than 0s"},
		{[]string{"dev", "--poll-interval", "-1s"}, nil, "--poll-interval -1s is out of range: it must be more than 0s"},
		{[]string{"worker", "--grace", "-1s"}, nil, "--grace -1s is out of range: it must be 0s or more"},
		{[]string{"worker", "--heartbeat", "-1s"}, nil, "--heartbeat -1s is out of range: it must be more than 0s"},
		{[]string{"worker", "--leader-ttl", "100ms"}, nil, "--leader-ttl 100ms is out of range: it must be 500ms or more"},
		{[]string{"server", "--sweep-interval", "0s"}, nil, "--sweep-interval 0s is out of range: it must be more than 0s"},
		{[]string{"server", "--timer-interval", "-1ms"}, nil, "--timer-interval -1ms is out of range"},
		{[]string{"server", "--session-gc-interval", "0s"}, nil, "--session-gc-interval 0s is out of range"},
		{[]string{"dev", "--warm-health-warn", "0s"}, nil, "--warm-health-warn 0s is out of range"},
		{[]string{"dev", "--warm-health-warn", "5s", "--warm-health-critical", "1s"}, nil, "--warm-health-critical (1s) must exceed --warm-health-warn (5s)"},
		{[]string{"dev", "--presence-interval", "0s"}, nil, "--presence-interval 0s is out of range"},
		{[]string{"dev", "--warm-sweep-interval", "-1s"}, nil, "--warm-sweep-interval -1s is out of range"},
		{[]string{"dev", "--drain-poll", "-1s"}, nil, "--drain-poll -1s is out of range: it must be 0s or more (0s is the default, 200ms)"},
		{[]string{"dev", "--outbox-retention", "-1h"}, nil, "--outbox-retention -1h0m0s is out of range"},
		{[]string{"dev", "--wake-rate", "-1"}, nil, "--wake-rate -1 is out of range: it must be 0 or more (0 turns the limit off)"},
		{[]string{"dev", "--wake-rate", "NaN"}, nil, "--wake-rate NaN is out of range"},
		{[]string{"server", "--wake-burst", "0"}, nil, "--wake-burst 0 is out of range: it must be 1 or more"},
		{[]string{"run", "wf.yaml", "--step-timeout", "-1s"}, nil, "--step-timeout -1s is out of range: it must be 0s or more (0s is the default, 30s)"},
		{[]string{"runs", "list", "--limit", "0"}, nil, "--limit 0 is out of range: it must be 1 or more"},
		{[]string{"runs", "waits", "some-id", "--limit", "-1"}, nil, "--limit -1 is out of range"},
		{[]string{"runs", "ledger", "some-id", "--attempt", "-1"}, nil, "--attempt -1 is out of range: it must be 0 or more (0 shows every attempt)"},
		{[]string{"runs", "events", "some-id", "--after", "-1"}, nil, "--after -1 is out of range"},
		{[]string{"runs", "list", "--store", "sqlite://other.db"}, nil, "--db fresh.db and --store sqlite://other.db both name the store: give one"},
		{[]string{"migrate", "--store", "postgres://u:pw@h/db"}, nil, "--store postgres://***@h/db both name the store"},
	} {
		r := refusedCmd(t, dir, c.env, append(c.args, db...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("starflow %s: exit %d, stdout %q, stderr %q; want exit 2, no output and %q",
				strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
		if strings.Contains(r.stderr, "pw@") {
			t.Errorf("the refusal shows the store password: %s", r.stderr)
		}
	}
	// Both store variables and no flag: which one was meant is unknown.
	r := refusedCmd(t, dir, []string{"STARFLOW_STORE=sqlite://a.db", "STARFLOW_DB=b.db"}, "migrate")
	if r.code != 2 || !strings.Contains(r.stderr, "STARFLOW_STORE and STARFLOW_DB are both set") {
		t.Errorf("both variables: exit %d, stderr %q", r.code, r.stderr)
	}
	// Refused before the store was opened: no database was created.
	for _, name := range []string{"fresh.db", "other.db", "a.db", "b.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused command lines (%v)", name, err)
		}
	}
	// The edges of the ranges are valid, and a flag replaces a variable.
	writeFile(t, dir, "wf.yaml", "name: wf\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	if r := starflowCmd(t, dir, nil, "apply", "wf.yaml", "--db", "ok.db"); r.code != 0 {
		t.Fatalf("apply: exit %d: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"enqueue", "wf", "--delay", "0s", "--priority", "-5", "--max-input-bytes", "-1"},
		{"runs", "list", "--limit", "1"},
		{"runs", "list", "--store", "sqlite://ok.db"},
	} {
		if !slices.Contains(args, "--store") {
			args = append(args, "--db", "ok.db")
		}
		if r := starflowCmd(t, dir, []string{"STARFLOW_DB=absent.db"}, args...); r.code != 0 {
			t.Errorf("starflow %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// refusedCmd runs a command line that must be refused at once: one that
// is not (a worker accepting --concurrency 0 would run until stopped) is
// killed after 20 s and reported with exit -1.
func refusedCmd(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// TestEveryNumericFlagHasARange: each int, duration or float flag of
// every command has an entry in flagRanges, so a flag added later cannot
// take a negative or zero value unchecked.
func TestEveryNumericFlagHasARange(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if _, ok := numericValue(c.Flags(), fl); !ok {
				return
			}
			seen++
			if _, ok := flagRanges[fl.Name]; !ok {
				t.Errorf("%s --%s (%s) has no range in flagRanges", c.CommandPath(), fl.Name, fl.Value.Type())
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if seen < 40 {
		t.Fatalf("only %d numeric flags found: the walk misses commands", seen)
	}
}
