package securitytest

// The harness of keys_test.go and blobs_test.go: the starflow binary run
// once or as a daemon, a notify receiver, and reading every value a
// database holds. Names start with kb (keys and blobs) so that the other
// files of the suite can have harnesses of their own.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to read the files the binary wrote
)

// kbResult is what one run of the binary printed and its exit status.
type kbResult struct {
	stdout, stderr string
	code           int
}

// kbRun runs the binary in dir with env added to the test's environment
// (STARFLOW_WAKE_KEYS and STARFLOW_WAKE_KEY_FILE removed first, so that
// only env sets them), bounded by a minute.
func kbRun(t *testing.T, dir string, env []string, args ...string) kbResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(kbBaseEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := kbResult{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("starflow %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// kbBaseEnv is the test's environment without the wake-key variables.
func kbBaseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STARFLOW_WAKE_KEYS=") || strings.HasPrefix(kv, "STARFLOW_WAKE_KEY_FILE=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// kbOutput collects a daemon's stderr and wakes waiters on every write.
type kbOutput struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (o *kbOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *kbOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// kbDaemon is a long-running starflow process (dev, worker, server, a
// `run` that waits); stderr collects its standard output and error.
type kbDaemon struct {
	cmd    *exec.Cmd
	stderr *kbOutput
	exited chan struct{}
}

// kbStart starts the binary in dir with env (as kbRun) and stops it
// (SIGKILL) at cleanup if the test did not.
func kbStart(t *testing.T, dir string, env []string, args ...string) *kbDaemon {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(kbBaseEnv(), env...)
	d := &kbDaemon{cmd: cmd, stderr: &kbOutput{changed: make(chan struct{})}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr // both: waitFor reads either
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("stderr of starflow %s:\n%s", strings.Join(args, " "), d.stderr.String())
		}
	})
	return d
}

var kbListening = regexp.MustCompile(`listening on (http://\S+)`)

// waitFor waits until the daemon's stderr matches re (or it exits, or a
// minute passes) and returns the first submatch (or the match).
func (d *kbDaemon) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		d.stderr.mu.Lock()
		m := re.FindStringSubmatch(d.stderr.b.String())
		changed := d.stderr.changed
		d.stderr.mu.Unlock()
		if m != nil {
			return m[len(m)-1]
		}
		select {
		case <-changed:
		case <-d.exited:
			t.Fatalf("starflow exited before printing %q:\n%s", re, d.stderr.String())
		case <-timeout:
			t.Fatalf("starflow did not print %q within a minute:\n%s", re, d.stderr.String())
		}
	}
}

// wait waits (a minute at most) for the process to exit by itself and
// returns its exit status.
func (d *kbDaemon) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		t.Fatalf("starflow did not exit within a minute:\n%s", d.stderr.String())
	}
	return d.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and waits for a clean exit.
func (d *kbDaemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		t.Fatal("starflow did not stop within a minute of SIGTERM")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("starflow exit status %d after SIGTERM:\n%s", code, d.stderr.String())
	}
}

// kbSink receives notify requests (the body of each).
type kbSink struct {
	srv    *httptest.Server
	bodies chan map[string]any
}

func kbNewSink(t *testing.T) *kbSink {
	t.Helper()
	s := &kbSink{bodies: make(chan map[string]any, 16)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case s.bodies <- body:
		default:
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// next waits (a minute at most) for the next notify request.
func (s *kbSink) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case b := <-s.bodies:
		return b
	case <-time.After(time.Minute):
		t.Fatal("no notify request within a minute")
		return nil
	}
}

// kbWriteFile writes name in dir.
func kbWriteFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kbPerm is the permission bits of file name.
func kbPerm(t *testing.T, name string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// kbCell is one value of a database: where it is and its bytes.
type kbCell struct {
	where string // table.column
	value []byte
}

// kbSQLiteCells reads every value of every table of the SQLite database at
// path (read only; another process may be writing it).
func kbSQLiteCells(t *testing.T, path string) []kbCell {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := kbStrings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if len(tables) < 10 {
		t.Fatalf("only %d tables in %s: %v", len(tables), path, tables)
	}
	var cells []kbCell
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				cells = append(cells, kbCell{where: table + "." + cols[i], value: kbBytes(v)})
			}
		}
		rows.Close()
	}
	return cells
}

// kbPGCells reads every value of every table of a PostgreSQL schema, each
// as its text form.
func kbPGCells(t *testing.T, conn *pgx.Conn, schema string) []kbCell {
	t.Helper()
	ctx := t.Context()
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables in schema %s: %v", len(tables), schema, tables)
	}
	var cells []kbCell
	for _, table := range tables {
		id := pgx.Identifier{schema, table}.Sanitize()
		rows, err := conn.Query(ctx, `SELECT j.key, j.value FROM `+id+` t, jsonb_each_text(to_jsonb(t)) j`)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for rows.Next() {
			var col string
			var v *string
			if err := rows.Scan(&col, &v); err != nil {
				t.Fatal(err)
			}
			if v != nil {
				cells = append(cells, kbCell{where: table + "." + col, value: []byte(*v)})
			}
		}
		rows.Close()
	}
	return cells
}

func kbStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func kbBytes(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return x
	case string:
		return []byte(x)
	default:
		return []byte(fmt.Sprint(x))
	}
}

// kbReadAll reads a response body.
func kbReadAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
