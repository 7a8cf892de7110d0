package crashtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// natsServer is a nats-server subprocess with JetStream that one test
// owns: its own port and storage directory, stopped at cleanup. The shared
// server at 127.0.0.1:4222 is never touched.
type natsServer struct {
	t      *testing.T
	bin    string
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *logBuffer
}

// natsBinary is STARFLOW_NATS_SERVER, nats-server on PATH, or
// /usr/sbin/nats-server. Without one the test skips, or fails under CI.
func natsBinary(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("STARFLOW_NATS_SERVER")}
	if p, err := exec.LookPath("nats-server"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/sbin/nats-server")
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nats-server is not installed and CI is set (install Debian's nats-server or set STARFLOW_NATS_SERVER)")
	}
	t.Skip("nats-server is not installed; set STARFLOW_NATS_SERVER to run the NATS tests")
	return ""
}

// freePort asks the kernel for a free TCP port on loopback.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNATS starts a nats-server with JetStream on a free port, storing in
// a temporary directory, and waits until it accepts connections.
func startNATS(t *testing.T) *natsServer {
	t.Helper()
	n := &natsServer{t: t, bin: natsBinary(t), port: freePort(t), dir: t.TempDir()}
	n.start()
	t.Cleanup(func() {
		if n.running() {
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() && n.log != nil {
			t.Logf("--- nats-server log:\n%s", tail(n.log.String(), 30))
		}
	})
	return n
}

// URL is the server's client URL (nats://127.0.0.1:PORT).
func (n *natsServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsServer) start() {
	n.t.Helper()
	n.log = &logBuffer{}
	n.cmd = exec.Command(n.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-js",
		"-sd", filepath.Join(n.dir, "js"))
	n.cmd.Stdout = n.log
	n.cmd.Stderr = n.log
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("start nats-server: %v", err)
	}
	n.exited = make(chan struct{})
	cmd, exited := n.cmd, n.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	waitFor(n.t, 30*time.Second, "nats-server to accept connections on "+n.URL(), func() bool {
		select {
		case <-n.exited:
			n.t.Fatalf("nats-server exited at start:\n%s", n.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

func (n *natsServer) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stop kills the server (SIGKILL: an outage, not a shutdown) and waits
// until the port refuses connections.
func (n *natsServer) stop() {
	n.t.Helper()
	if !n.running() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// restart starts the server again on the same port and storage directory
// (its JetStream data survives).
func (n *natsServer) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}
