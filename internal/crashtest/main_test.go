package crashtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/starflow/starflow/internal/pgtest"
	"io"
	"log/slog"
	"net/url"
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
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state/pgstore"
)

// binary is the starflow executable, built once by TestMain without -race.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		fmt.Fprintln(os.Stderr, "crashtest: cannot find the module root (go env GOMOD):", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "starflow-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "starflow")
	build := exec.Command("go", "build", "-o", binary, "./cmd/starflow")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	build.Env = append(os.Environ(), "GOFLAGS="+withoutRace(os.Getenv("GOFLAGS")))
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest: building starflow:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

// withoutRace drops -race from GOFLAGS: the binary is never race-built.
func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && !strings.HasPrefix(f, "-race=") && !strings.HasPrefix(f, "--race=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// pgURL is STARFLOW_TEST_PG_URL, or the development machines' and CI's
// local database.
func pgURL() string { return pgtest.URL() }

// requirePG skips t without PostgreSQL, or fails it under CI.
func requirePG(t *testing.T) {
	t.Helper()
	pgtest.Require(t)
}

func redacted(s string) string { return pgtest.Redacted(s) }

// cluster is one test's deployment: a schema of its own, the store the
// test reads and enqueues through, and the processes it started.
type cluster struct {
	t        *testing.T
	schema   string
	storeURL string // for the CLI: pgURL with schema=<schema>
	store    *pgstore.Store
	engine   *starflow.Engine // NoRunner: enqueues only
	dir      string

	mu    sync.Mutex
	procs []*process
}

// newCluster creates a fresh schema with Starflow's tables (dropped at
// cleanup, after every process of the test has been killed).
func newCluster(t *testing.T, maxConns int32) *cluster {
	t.Helper()
	requirePG(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "crashtest_" + hex.EncodeToString(b[:])
	u, err := url.Parse(pgURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()

	store, err := pgstore.Open(ctx, pgstore.Config{URL: pgURL(), Schema: schema, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, pgURL())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(cctx)
		if _, err := conn.Exec(cctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, schema: schema, storeURL: u.String(), store: store, engine: eng, dir: t.TempDir()}
	t.Cleanup(c.stopAll)
	return c
}

// pool is the store's connection pool; its search_path is the schema.
func (c *cluster) pool() *pgxpool.Pool { return c.store.Pool() }

// count runs a query returning one integer.
func (c *cluster) count(sql string, args ...any) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := c.pool().QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// dbNow is the database clock.
func (c *cluster) dbNow() time.Time {
	c.t.Helper()
	var now time.Time
	if err := c.pool().QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		c.t.Fatal(err)
	}
	return now
}

// apply stores the definition with `starflow apply` (the CLI path).
func (c *cluster) apply(name, yaml string) {
	c.t.Helper()
	path := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := exec.Command(binary, "apply", path, "--store", c.storeURL).CombinedOutput()
	if err != nil {
		c.t.Fatalf("starflow apply: %v\n%s", err, out)
	}
}

// enqueue enqueues n runs of workflow through the Go API and returns their
// ids.
func (c *cluster) enqueue(workflow string, n int) []string {
	c.t.Helper()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		run, err := c.engine.Enqueue(context.Background(), workflow, map[string]any{"n": i}, nil)
		if err != nil {
			c.t.Fatalf("enqueue %d: %v", i, err)
		}
		ids = append(ids, run.ID)
	}
	return ids
}

// clusterWakeKeys is the wake-key ring of a cluster's processes: a
// PostgreSQL store keeps no signing secret, so every process is given the
// same ring (a later entry of a process's env overrides it).
const clusterWakeKeys = "STARFLOW_WAKE_KEYS=crashtest:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// workerEnv names the environment variable that tells a worker's requests
// apart at the side-effects service (the workflows send it as a header).
const workerEnv = "CRASHTEST_WORKER"

// startWorker starts `starflow worker` named name (sent as the
// X-Crashtest-Worker header) with extra flags, and waits until it has
// started; its runner id is then known.
func (c *cluster) startWorker(name string, flags ...string) *process {
	c.t.Helper()
	args := append([]string{"worker", "--store", c.storeURL, "--allow-env", workerEnv}, flags...)
	p := c.start(name, []string{workerEnv + "=" + name}, args...)
	p.waitStarted(c.t, "worker")
	return p
}

// startServer starts `starflow server` (the lease sweep) with a 1 s sweep
// interval.
func (c *cluster) startServer() *process {
	c.t.Helper()
	p := c.start("server", nil, "server", "--store", c.storeURL, "--sweep-interval", "1s", "--addr", "127.0.0.1:0")
	p.waitStarted(c.t, "server")
	return p
}

// start runs the binary in the background; its stderr is kept. A worker
// runs no maintenance unless args say --maintenance: these deployments
// give maintenance to their `starflow server` (with short intervals),
// and a worker elected instead would sweep at the 30 s default.
func (c *cluster) start(name string, env []string, args ...string) *process {
	c.t.Helper()
	args = workerMaintenance(args)
	cmd := exec.Command(binary, args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), clusterWakeKeys), env...)
	p := &process{name: name, cmd: cmd, log: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stdout = io.Discard
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// stopAll kills the processes still running and, when the test failed,
// logs what they wrote on stderr.
func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if c.t.Failed() {
			c.t.Logf("--- stderr of %s (%s):\n%s", p.name, p.runnerID, tail(p.log.String(), 60))
		}
	}
}

// stopGracefully sends SIGTERM to every process still running and checks
// each exits with status 0.
func (c *cluster) stopGracefully() {
	c.t.Helper()
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		if !p.running() {
			continue
		}
		p.signal(c.t, syscall.SIGTERM)
	}
	for _, p := range procs {
		code := p.waitExit(c.t, 60*time.Second)
		if p.killed {
			continue
		}
		if code != 0 {
			c.t.Errorf("%s exited with status %d after SIGTERM", p.name, code)
		}
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("[… %d lines]", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

// process is one started starflow process.
type process struct {
	name     string
	cmd      *exec.Cmd
	log      *logBuffer
	runnerID string
	exited   chan struct{}
	killed   bool // SIGKILLed on purpose

	mu      sync.Mutex
	waitErr error
}

var startedLine = regexp.MustCompile(`(?m)^(worker|server) (\S+) started on `)

// waitStarted waits for the "<what> <id> started on" line and records the
// runner id.
func (p *process) waitStarted(t *testing.T, what string) {
	t.Helper()
	waitFor(t, 60*time.Second, p.name+" to start", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before starting:\n%s", p.name, p.log.String())
		default:
		}
		m := startedLine.FindStringSubmatch(p.log.String())
		if m == nil || m[1] != what {
			return false
		}
		p.runnerID = m[2]
		return true
	})
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill(t *testing.T) {
	t.Helper()
	p.killed = true
	p.signal(t, syscall.SIGKILL)
	p.waitExit(t, 30*time.Second)
}

// waitExit waits for the process to end and returns its exit status (-1
// when a signal ended it).
func (p *process) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr == nil {
		return 0
	}
	if ee, ok := p.waitErr.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.waitErr)
	return -1
}

// logBuffer is an io.Writer safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// runIDs runs a query returning run ids.
func (c *cluster) runIDs(sql string, args ...any) []string {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(), sql, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
	return ids
}

// workerMaintenance adds --maintenance=false to `worker` args that do not
// set --maintenance themselves.
func workerMaintenance(args []string) []string {
	if len(args) == 0 || args[0] != "worker" {
		return args
	}
	for _, a := range args {
		if a == "--maintenance" || strings.HasPrefix(a, "--maintenance=") {
			return args
		}
	}
	return append(append([]string(nil), args...), "--maintenance=false")
}
