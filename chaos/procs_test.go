//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The processes of a deployment: a private PostgreSQL cluster, a NATS
// server, and Starflow's own (server, workers, the remote job worker),
// each restartable on the same address after a SIGKILL.

// binaries are built once per test binary: starflow with -tags chaos (the
// only build that reads STARFLOW_FAULTS) and the example Go job worker.
var binaries struct {
	once             sync.Once
	starflow, worker string
	err              error
}

func buildBinaries(t *testing.T) (starflowBin, workerBin string) {
	t.Helper()
	binaries.once.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			binaries.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		dir, err := os.MkdirTemp("", "starflow-chaos-bin-")
		if err != nil {
			binaries.err = err
			return
		}
		binaries.starflow = filepath.Join(dir, "starflow")
		binaries.worker = filepath.Join(dir, "go-worker")
		for _, b := range []struct{ out, pkg, tags string }{
			{binaries.starflow, "./cmd/starflow", "chaos"},
			{binaries.worker, "./examples/workers/go-worker", ""},
		} {
			args := []string{"build", "-o", b.out}
			if b.tags != "" {
				args = append(args, "-tags", b.tags)
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Dir = root
			// The processes are never race-built: the race detector's
			// slowdown would make every lease a lost one.
			cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				binaries.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if binaries.err != nil {
		t.Fatal(binaries.err)
	}
	return binaries.starflow, binaries.worker
}

// freePort asks the kernel for a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one long-running process the harness may kill, freeze and start
// again with the same command line.
type proc struct {
	name string
	path string
	args []string
	env  func() []string // called at every start
	dir  string
	sink func(name, line string)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	frozen  bool
	starts  int
	tailBuf []string
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env()...)
	// A group of its own: the test's Ctrl-C does not reach it, and
	// SIGSTOP freezes the process, not the harness. It dies with the
	// harness (Pdeathsig), which leaves no process behind when the test
	// binary is killed at its timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.frozen = cmd, make(chan struct{}), false
	p.starts++
	exited := p.exited
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.tailBuf = append(p.tailBuf, line)
			if len(p.tailBuf) > 200 {
				p.tailBuf = p.tailBuf[len(p.tailBuf)-200:]
			}
			p.mu.Unlock()
			if p.sink != nil {
				p.sink(p.name, line)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		close(exited)
	}()
	return nil
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (thawing first does not matter: SIGKILL ends a
// stopped process too) and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
	}
}

// signal sends sig to a running process; SIGSTOP and SIGCONT are noted.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
	}
	if p.cmd.Process.Signal(sig) != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	}
	return true
}

// stopGracefully sends SIGTERM and waits, then SIGKILLs.
func (p *proc) stopGracefully(wait time.Duration) {
	p.signal(syscall.SIGCONT)
	if !p.signal(syscall.SIGTERM) {
		return
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(wait):
		p.kill()
	}
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tailBuf, "\n")
}

// pgCluster is a PostgreSQL cluster of the harness's own: initdb in a
// temporary directory, a free port, a socket in the data directory. The
// shared server of the machine is never touched.
type pgCluster struct {
	bin, data, sock, log string
	port                 int
	asPostgres           bool // running as root: the server runs as postgres
}

func postgresBin(t *testing.T) string {
	t.Helper()
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin/initdb", "/usr/local/pgsql/bin/initdb"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return filepath.Dir(m[len(m)-1])
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("chaos: PostgreSQL's initdb is not installed (Debian: postgresql); the harness starts a private cluster")
	return ""
}

func startPG(t *testing.T) *pgCluster {
	t.Helper()
	bin := postgresBin(t)
	stopOrphans(t, bin)
	base, err := os.MkdirTemp("", pgDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// The owner file names this process: a later harness stops the cluster
	// when this one was killed before its cleanup ran (SIGKILL, a test
	// timeout), since pg_ctl's server outlives it.
	if err := os.WriteFile(filepath.Join(base, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{bin: bin, data: filepath.Join(base, "data"), sock: base,
		log: filepath.Join(base, "postgres.log"), port: freePort(t), asPostgres: os.Geteuid() == 0}
	if c.asPostgres {
		// initdb refuses root: the cluster belongs to postgres.
		if err := os.Chmod(base, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop") })
	return c
}

// pgDirPrefix begins the name of every harness cluster's directory.
const pgDirPrefix = "starflow-chaos-pg-"

// stopOrphans stops and removes the clusters of harness processes that no
// longer exist.
func stopOrphans(t *testing.T, bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pgDirPrefix+"*"))
	for _, base := range dirs {
		b, err := os.ReadFile(filepath.Join(base, "owner"))
		if err != nil {
			continue // being created, or not the harness's
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its owner runs
		}
		c := &pgCluster{bin: bin, data: filepath.Join(base, "data"), asPostgres: os.Geteuid() == 0}
		out, err := c.run("pg_ctl", "-D", c.data, "status")
		if err == nil {
			t.Logf("chaos: stopping the cluster %s left by killed harness process %d", base, pid)
			if out, err := c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
				t.Logf("chaos: pg_ctl stop: %v\n%s", err, out)
				continue
			}
		} else if len(out) == 0 {
			continue
		}
		os.RemoveAll(base)
	}
}

func (c *pgCluster) run(tool string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, tool)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	return cmd.CombinedOutput()
}

func (c *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=400", c.port, c.sock)
	out, err := c.run("pg_ctl", "-D", c.data, "-l", c.log, "-w", "-t", "60", "-o", opts, "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return nil
}

// restart stops the cluster the way a crash does (immediate mode: no
// checkpoint, every connection cut; the start replays the WAL) and starts
// it again.
func (c *pgCluster) restart(down time.Duration) error {
	if out, err := c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	time.Sleep(down)
	return c.start()
}

func (c *pgCluster) url() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(c.port) + "/postgres?sslmode=disable"
}

// natsServer is a nats-server with JetStream on a free port; its store
// directory survives a kill, so a restart finds the warm buckets again.
type natsServer struct {
	*proc
	port int
}

func startNATS(t *testing.T, sink func(name, line string)) *natsServer {
	t.Helper()
	bin := os.Getenv("STARFLOW_NATS_SERVER")
	if bin == "" {
		bin = "nats-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/nats-server"); err2 != nil {
			t.Fatalf("chaos: nats-server is not installed (Debian: nats-server): %v", err)
		}
		path = "/usr/sbin/nats-server"
	}
	dir := t.TempDir()
	port := freePort(t)
	n := &natsServer{port: port, proc: &proc{name: "nats", path: path, dir: dir, sink: sink,
		args: []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js")},
		env:  func() []string { return nil }}}
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	waitTCP(t, n.port, 30*time.Second)
	return n
}

// waitTCP waits until something accepts on the loopback port.
func waitTCP(t *testing.T, port int, timeout time.Duration) {
	t.Helper()
	if !tcpUp(port, timeout) {
		t.Fatalf("nothing listens on 127.0.0.1:%d after %s", port, timeout)
	}
}

func tcpUp(port int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runCLI runs a one-shot starflow command and returns its stdout.
func runCLI(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("starflow %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// TestOrphanClusterStopped: a cluster whose harness process is gone (killed
// before its cleanup ran) is stopped and removed by the next harness.
func TestOrphanClusterStopped(t *testing.T) {
	c := startPG(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(c.data)
	if err := os.WriteFile(filepath.Join(base, "owner"), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	stopOrphans(t, c.bin)
	if out, err := c.run("pg_ctl", "-D", c.data, "status"); err == nil {
		t.Fatalf("the orphan cluster still runs:\n%s", out)
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Fatalf("the orphan cluster's directory is still there: %v", err)
	}
}
