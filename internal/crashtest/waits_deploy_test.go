package crashtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state/sqlitestore"
)

// liteDeploy is one test's single-file deployment for the durable-wait
// acceptance tests (issue 5): a SQLite file that the test reads and
// enqueues through, and the starflow processes (worker, dev) and CLI
// invocations working on the same file.
type liteDeploy struct {
	t      *testing.T
	dir    string
	db     string
	store  *sqlitestore.Store
	engine *starflow.Engine // NoRunner: enqueues only

	mu    sync.Mutex
	procs []*process
}

func newLiteDeploy(t *testing.T) *liteDeploy {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "waits.db")
	store, err := sqlitestore.Open(sqlitestore.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d := &liteDeploy{t: t, dir: dir, db: db, store: store, engine: eng}
	t.Cleanup(d.stopAll)
	return d
}

// cliResult is one finished CLI invocation.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the starflow binary with args and --db, and returns what it
// printed and its exit status.
func (d *liteDeploy) cli(args ...string) cliResult {
	d.t.Helper()
	return d.cliEnv(nil, args...)
}

// cliEnv is cli with extra environment variables.
func (d *liteDeploy) cliEnv(env []string, args ...string) cliResult {
	d.t.Helper()
	cmd := exec.Command(binary, append(args, "--db", d.db)...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatal(err)
	}
	return cliResult{out.String(), errb.String(), code}
}

// mustCLI is cli that fails the test on a non-zero exit.
func (d *liteDeploy) mustCLI(args ...string) string {
	d.t.Helper()
	r := d.cli(args...)
	if r.code != 0 {
		d.t.Fatalf("starflow %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// apply stores a definition with `starflow apply`.
func (d *liteDeploy) apply(name, yaml string) {
	d.t.Helper()
	path := filepath.Join(d.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		d.t.Fatal(err)
	}
	d.mustCLI("apply", path)
}

// enqueue enqueues one run through the Go API and returns its id.
func (d *liteDeploy) enqueue(workflow string, input any) string {
	d.t.Helper()
	run, err := d.engine.Enqueue(context.Background(), workflow, input, nil)
	if err != nil {
		d.t.Fatalf("enqueue %s: %v", workflow, err)
	}
	return run.ID
}

var liteStartedLine = regexp.MustCompile(`(?m)^(worker|server|dev) (\S+) started on `)

// startProc starts `starflow WHAT --db … FLAGS` with extra env and waits
// for its "started" line. A worker runs no maintenance unless FLAGS say
// --maintenance (see workerMaintenance): these tests give it to `dev`.
func (d *liteDeploy) startProc(what string, env []string, flags ...string) *process {
	d.t.Helper()
	args := []string{what, "--db", d.db}
	if what == "dev" || what == "server" {
		// A free port for the listener: parallel tests would collide on the
		// default 127.0.0.1:8480 (and with any other process holding it).
		args = append(args, "--addr", "127.0.0.1:0")
	}
	cmd := exec.Command(binary, workerMaintenance(append(args, flags...))...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), env...)
	p := &process{name: what, cmd: cmd, log: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stdout = io.Discard
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	d.mu.Lock()
	d.procs = append(d.procs, p)
	d.mu.Unlock()
	waitFor(d.t, 60*time.Second, what+" to start", func() bool {
		if !p.running() {
			d.t.Fatalf("%s exited before starting:\n%s", what, p.log.String())
		}
		m := liteStartedLine.FindStringSubmatch(p.log.String())
		if m == nil {
			return false
		}
		p.runnerID = m[2]
		return true
	})
	return p
}

// waitLogged waits until p printed line (e.g. "faultpoint X reached").
func (d *liteDeploy) waitLogged(p *process, line string, timeout time.Duration) {
	d.t.Helper()
	waitFor(d.t, timeout, p.name+" to print "+line, func() bool {
		if strings.Contains(p.log.String(), line) {
			return true
		}
		if !p.running() {
			d.t.Fatalf("%s exited before printing %q:\n%s", p.name, line, tail(p.log.String(), 40))
		}
		return false
	})
}

// stopAll kills what is still running and, when the test failed, logs
// the processes' stderr.
func (d *liteDeploy) stopAll() {
	d.mu.Lock()
	procs := d.procs
	d.mu.Unlock()
	for _, p := range procs {
		if p.running() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if d.t.Failed() {
			d.t.Logf("--- stderr of %s (%s):\n%s", p.name, p.runnerID, tail(p.log.String(), 60))
		}
	}
}

// count runs a query returning one integer.
func (d *liteDeploy) count(query string, args ...any) int {
	d.t.Helper()
	var n int
	if err := d.store.DB().QueryRow(query, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// runRowLite is what the wait tests read of a run.
type runRowLite struct {
	status, claim, output string
	attempt               int
}

func (d *liteDeploy) run(id string) runRowLite {
	d.t.Helper()
	var r runRowLite
	var out *string
	if err := d.store.DB().QueryRow(`SELECT status, claim_state, attempt, output_json FROM workflow_runs WHERE id = ?`, id).
		Scan(&r.status, &r.claim, &r.attempt, &out); err != nil {
		d.t.Fatal(err)
	}
	if out != nil {
		r.output = *out
	}
	return r
}

// events counts a run's events of one type (and node, when not "").
func (d *liteDeploy) events(runID, typ, node string) int {
	d.t.Helper()
	if node == "" {
		return d.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = ? AND event_type = ?`, runID, typ)
	}
	return d.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = ? AND event_type = ? AND node_id = ?`, runID, typ, node)
}

// waitRunEnded waits until the run's status is terminal and returns it.
func (d *liteDeploy) waitRunEnded(id string, timeout time.Duration) runRowLite {
	d.t.Helper()
	var r runRowLite
	waitFor(d.t, timeout, "run "+id+" to end", func() bool {
		r = d.run(id)
		return r.status == "succeeded" || r.status == "failed" || r.status == "cancelled"
	})
	return r
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// eventLog is a run's events, one a line (for failure messages).
func (d *liteDeploy) eventLog(runID string) string {
	d.t.Helper()
	rows, err := d.store.DB().Query(`SELECT attempt, event_type, coalesce(node_id, ''), coalesce(payload_json, '') FROM workflow_run_events WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		d.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var attempt int
		var typ, node, payload string
		if err := rows.Scan(&attempt, &typ, &node, &payload); err != nil {
			d.t.Fatal(err)
		}
		fmt.Fprintf(&b, "  attempt %d %-18s %-10s %s\n", attempt, typ, node, short(payload, 120))
	}
	return b.String()
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
