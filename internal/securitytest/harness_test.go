package securitytest

// The suite's harness, one of each: the starflow binary run to completion
// (runStarflow) or as a long-running process (startStarflow,
// startListener), a file writer, a notify receiver, every value of a
// SQLite file or a PostgreSQL schema, and a fresh PostgreSQL schema.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to read the files the binary wrote

	"github.com/starflow/starflow/internal/pgtest"
)

// cliResult is what one starflow command printed and how it exited.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// baseEnv is the test's environment without any STARFLOW_ variable: a
// command gets only the Starflow settings its test gives it.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STARFLOW_") {
			env = append(env, kv)
		}
	}
	return env
}

// runStarflow runs the starflow binary with args in dir, with baseEnv plus
// env, and returns what it printed and its exit status. It fails the test
// when the binary cannot start or runs past a minute.
func runStarflow(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	return runStarflowStdin(t, dir, env, "", args...)
}

// runStarflowStdin is runStarflow with stdin as the command's standard
// input.
func runStarflowStdin(t *testing.T, dir string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		res.code = exit.ExitCode()
	default:
		t.Fatalf("starflow %s: %v\n%s", strings.Join(args, " "), err, res)
	}
	return res
}

// applyAndEnqueue applies the definition file (in dir) to the SQLite
// file db and enqueues a run of workflow name; it returns the run's id.
func applyAndEnqueue(t *testing.T, dir, file, name, db string) string {
	t.Helper()
	if r := runStarflow(t, dir, nil, "apply", file, "--db", db); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	r := runStarflow(t, dir, nil, "enqueue", name, "--db", db)
	if r.code != 0 {
		t.Fatalf("enqueue: %s", r)
	}
	return strings.TrimSpace(r.stdout)
}

// writeFile writes content to dir/name (mode 0600) and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// perm is the permission bits of file name.
func perm(t *testing.T, name string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// processLog is what a long-running process printed (standard output
// and error): it keeps everything written and signals each registered
// pattern the first time it matches.
type processLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	matches []*logMatch
}

type logMatch struct {
	re   *regexp.Regexp
	ch   chan string // gets the first submatch (or the match), then closes
	done bool
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	l.check()
	return len(p), nil
}

// check signals the matches whose pattern now matches. l.mu is held.
func (l *processLog) check() {
	for _, m := range l.matches {
		if m.done {
			continue
		}
		if sub := m.re.FindStringSubmatch(l.buf.String()); sub != nil {
			m.done = true
			m.ch <- sub[len(sub)-1]
			close(m.ch)
		}
	}
}

// match returns a channel that gets re's first submatch (or whole match)
// once the log holds it, whether already or later.
func (l *processLog) match(re *regexp.Regexp) <-chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := &logMatch{re: re, ch: make(chan string, 1)}
	l.matches = append(l.matches, m)
	l.check()
	return m.ch
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// daemon is a long-running starflow process (dev, worker, server, a `run`
// that waits).
type daemon struct {
	cmd *exec.Cmd
	// stderr holds what the process printed on standard output and
	// standard error.
	stderr *processLog
	exited chan struct{}
	// base is the listener's URL, http://127.0.0.1:PORT (startListener).
	base string
}

var (
	listeningRe = regexp.MustCompile(`listening on (http://\S+)`)
	startedRe   = regexp.MustCompile(`(?m)^(?:dev|server) \S+ started on `)
)

// startStarflow starts the binary with args in dir, with baseEnv plus env,
// and kills it (SIGKILL) at cleanup if the test did not stop it; what it
// printed is logged when the test failed.
func startStarflow(t *testing.T, dir string, env []string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	d := &daemon{cmd: cmd, stderr: &processLog{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
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
			t.Logf("output of starflow %s:\n%s", strings.Join(args, " "), d.stderr.String())
		}
	})
	return d
}

// startListener starts a `dev` or `server` command (args with --addr
// 127.0.0.1:0) as startStarflow does and waits until it listens and has
// started; base is then its listener's URL.
func startListener(t *testing.T, dir string, env []string, args ...string) *daemon {
	t.Helper()
	d := startStarflow(t, dir, env, args...)
	d.base = d.waitFor(t, listeningRe)
	d.waitFor(t, startedRe)
	return d
}

// addr is the listener's HOST:PORT.
func (d *daemon) addr() string { return strings.TrimPrefix(d.base, "http://") }

// waitFor waits until the process printed a match of re (or it exits, or
// a minute passes) and returns the first submatch (or the match).
func (d *daemon) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	ch := d.stderr.match(re)
	select {
	case s := <-ch:
		return s
	case <-d.exited:
		select { // everything printed was written before the exit was seen
		case s := <-ch:
			return s
		default:
		}
		t.Fatalf("starflow exited before printing %q:\n%s", re, d.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("starflow did not print %q within a minute:\n%s", re, d.stderr.String())
	}
	return ""
}

// wait waits (a minute at most) for the process to exit by itself and
// returns its exit status.
func (d *daemon) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		t.Fatalf("starflow did not exit within a minute:\n%s", d.stderr.String())
	}
	return d.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and waits (a minute at most) for a clean exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if code := d.wait(t); code != 0 {
		t.Fatalf("starflow exit status %d after SIGTERM:\n%s", code, d.stderr.String())
	}
}

// notifySink is an HTTP server receiving wait notify requests.
type notifySink struct {
	srv    *httptest.Server
	bodies chan map[string]any
}

// newNotifySink starts a notify receiver, closed at cleanup. A body that
// is not a JSON object is answered 400; bodies past the 64 not yet
// received by the test are dropped.
func newNotifySink(t *testing.T) *notifySink {
	t.Helper()
	s := &notifySink{bodies: make(chan map[string]any, 64)}
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

// next waits (a minute at most) for the next notify request's body.
func (s *notifySink) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case b := <-s.bodies:
		return b
	case <-time.After(time.Minute):
		t.Fatal("no notify request within a minute")
		return nil
	}
}

// token waits for the next notify request and returns its wake token.
func (s *notifySink) token(t *testing.T) string {
	t.Helper()
	body := s.next(t)
	tok, _ := body["token"].(string)
	if tok == "" {
		t.Fatalf("notify request without a token: %v", body)
	}
	return tok
}

// dbCell is one value of a database: where it is and its bytes (nil for
// NULL; numbers as text).
type dbCell struct {
	where string // table.column
	value []byte
}

// openSQLite opens the SQLite file at path read-only (another process may
// be writing it; its WAL is read through SQLite), closed at cleanup.
func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryRow runs one query on the SQLite file at path and scans its row.
func queryRow(t *testing.T, path, query string, dest ...any) {
	t.Helper()
	if err := openSQLite(t, path).QueryRow(query).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// sqliteCells reads every value of every table of the SQLite file at path,
// which must hold a migrated Starflow database.
func sqliteCells(t *testing.T, path string) []dbCell {
	t.Helper()
	db := openSQLite(t, path)
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables in %s: %v", len(tables), path, tables)
	}
	var cells []dbCell
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
				cells = append(cells, dbCell{where: table + "." + cols[i], value: cellBytes(v)})
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return cells
}

func cellBytes(v any) []byte {
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

// pgCells reads every value of every table of a PostgreSQL schema, each
// as its text form.
func pgCells(t *testing.T, conn *pgx.Conn, schema string) []dbCell {
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
	var cells []dbCell
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
				cells = append(cells, dbCell{where: table + "." + col, value: []byte(*v)})
			}
		}
		rows.Close()
	}
	return cells
}

// pgSchema is a fresh PostgreSQL schema for one test, named prefix_<12
// hex>: the store URL that selects it, and a connection to the database.
// The schema is dropped and the connection closed at cleanup. It skips the
// test when PostgreSQL is not available (pgtest.Require).
func pgSchema(t *testing.T, prefix string) (store string, conn *pgx.Conn, schema string) {
	t.Helper()
	pgtest.Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = prefix + "_" + hex.EncodeToString(b[:])
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	conn, err = pgx.Connect(t.Context(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		conn.Close(ctx)
	})
	return u.String(), conn, schema
}

// readAll reads a response body.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The names of the keys-and-blobs harness this file replaced, for tests
// written against it; new tests use the names above.
type kbResult = cliResult

var (
	kbRun       = runStarflow
	kbStart     = startStarflow
	kbWriteFile = writeFile
	kbBaseEnv   = baseEnv
	kbNewSink   = newNotifySink
	kbPerm      = perm
)
