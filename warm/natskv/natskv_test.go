package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/natskv"
	"github.com/starflow/starflow/warm/warmtest"
)

// TestConformanceEmbedded runs the suite on a fresh embedded server (no
// TCP listener) per subtest.
func TestConformanceEmbedded(t *testing.T) {
	warmtest.Run(t, func(t *testing.T) warm.Store {
		s, err := natskv.OpenEmbedded(context.Background(), natskv.EmbeddedOptions{Dir: t.TempDir()}, natskv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestConformanceEmbeddedTCP: an embedded server on a random port, reached
// by URL through Open.
func TestConformanceEmbeddedTCP(t *testing.T) {
	warmtest.Run(t, func(t *testing.T) warm.Store {
		srv, err := natskv.StartServer(natskv.EmbeddedOptions{Dir: t.TempDir(), Port: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(srv.ClientURL(), ":4222") {
			t.Fatalf("ClientURL %q: want a random port on 127.0.0.1", srv.ClientURL())
		}
		s, err := natskv.Open(context.Background(), srv.ClientURL(), natskv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestConformanceSubprocess runs the suite against the nats-server binary
// (the version deployed next to us, 2.9.10 in CI: no per-message TTL), one
// process, one bucket prefix per subtest.
func TestConformanceSubprocess(t *testing.T) {
	ns := startNATS(t, freePort(t), t.TempDir())
	var n atomic.Int64
	warmtest.Run(t, func(t *testing.T) warm.Store {
		s, err := natskv.Open(context.Background(), ns.url, natskv.Options{Prefix: fmt.Sprintf("c%d", n.Add(1)), MemoryStorage: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestServerStoppedAndRestarted: with the server killed, calls fail with
// warm.ErrUnavailable within a bounded time; after it is restarted on the
// same port and store directory, the same Store works again and the data
// written before is there.
func TestServerStoppedAndRestarted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			port, dir := freePort(t), t.TempDir()
			ns := startNATS(t, port, dir)
			const opTimeout = 2 * time.Second
			s, err := natskv.Open(context.Background(), ns.url, natskv.Options{OpTimeout: opTimeout, ReconnectWait: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			if _, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Status: "running", Version: 5}, false); err != nil {
				t.Fatalf("PutRun before the stop: %v", err)
			}

			ns.stop(t, sig)

			// Every call returns within its bound; soon they all fail with
			// ErrUnavailable (the first may still be in flight at the kill).
			const bound = opTimeout + 3*time.Second
			var lastErr error
			deadline := time.Now().Add(30 * time.Second)
			for unavailable := 0; unavailable < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("calls did not fail with ErrUnavailable while the server was down; last error %v", lastErr)
				}
				start := time.Now()
				_, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Status: "x", Version: 6}, false)
				if took := time.Since(start); took > bound {
					t.Fatalf("PutRun with the server down took %v, bound %v", took, bound)
				}
				if err == nil {
					t.Fatal("PutRun succeeded with the server down")
				}
				lastErr = err
				if errors.Is(err, warm.ErrUnavailable) {
					unavailable++
				}
				if err := s.Ping(ctx); !errors.Is(err, warm.ErrUnavailable) {
					lastErr = err
				}
			}
			if !strings.Contains(lastErr.Error(), ns.url) {
				t.Errorf("error %q does not name the server %s", lastErr, ns.url)
			}

			startNATSAt(t, port, dir)
			deadline = time.Now().Add(30 * time.Second)
			for {
				wrote, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Status: "resumed", Version: 7}, false)
				if err == nil {
					if !wrote {
						t.Fatal("PutRun v7 after the restart reported no write")
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store did not recover within 30s of the restart: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// The data of before the stop survived (file storage): v5 < v7,
			// and an old write is still refused.
			if wrote, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Version: 5}, false); err != nil || wrote {
				t.Fatalf("PutRun v5 after restart: wrote=%v err=%v, want a no-op", wrote, err)
			}
			e, err := s.GetRun(ctx, "r")
			if err != nil || e.Version != 7 || e.Status != "resumed" {
				t.Fatalf("GetRun after restart = %+v, %v", e, err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("Ping after restart: %v", err)
			}
		})
	}
}

// TestOpenWhileServerDown: Open does not need the server; calls fail with
// ErrUnavailable until it starts, then work.
func TestOpenWhileServerDown(t *testing.T) {
	port, dir := freePort(t), t.TempDir()
	s, err := natskv.Open(context.Background(), fmt.Sprintf("nats://127.0.0.1:%d", port), natskv.Options{OpTimeout: time.Second, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open with the server down: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Ping(context.Background()); !errors.Is(err, warm.ErrUnavailable) {
		t.Fatalf("Ping with the server down = %v, want ErrUnavailable", err)
	}
	startNATSAt(t, port, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Ping(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping did not succeed within 30s of the server's start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.PutRun(context.Background(), &warm.RunEntry{RunID: "r", Version: 1}, false); err != nil {
		t.Fatal(err)
	}
}

// TestOpenWithCredentialsInURL: a NATS server that requires a user and
// password (or a token) is reached with them in the URL
// (nats://USER:PASSWORD@HOST:PORT, nats://TOKEN@HOST:PORT); without them,
// or with a wrong password, every call fails with ErrUnavailable. No error
// carries the password or the token (Redacted).
func TestOpenWithCredentialsInURL(t *testing.T) {
	const user, password, token = "starflow", "pw-3f9a1c7e5b", "tok-8d2e6a4f0c"
	for _, c := range []struct {
		name, good string
		bad        []string
		auth       []string
	}{
		{"user and password", "nats://" + user + ":" + password + "@", []string{"nats://", "nats://" + user + ":wrong-" + password + "@"}, []string{"--user", user, "--pass", password}},
		{"token", "nats://" + token + "@", []string{"nats://", "nats://wrong-" + token + "@"}, []string{"--auth", token}},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freePort(t)
			startNATSAt(t, port, t.TempDir(), c.auth...)
			hostPort := fmt.Sprintf("127.0.0.1:%d", port)
			o := natskv.Options{OpTimeout: time.Second, ReconnectWait: 50 * time.Millisecond}
			s, err := natskv.Open(context.Background(), c.good+hostPort, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			var pingErr error
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if pingErr = s.Ping(context.Background()); pingErr == nil {
					break
				}
			}
			if pingErr != nil {
				t.Fatalf("Ping with the credentials in the URL: %v", pingErr)
			}
			if _, err := s.PutRun(context.Background(), &warm.RunEntry{RunID: "r", Version: 1}, false); err != nil {
				t.Fatal(err)
			}
			for _, bad := range c.bad {
				s, err := natskv.Open(context.Background(), bad+hostPort, o)
				if err != nil {
					t.Fatal(err)
				}
				err = s.Ping(context.Background())
				_ = s.Close()
				if !errors.Is(err, warm.ErrUnavailable) {
					t.Fatalf("Ping via %s = %v, want ErrUnavailable", natskv.Redacted(bad+hostPort), err)
				}
				if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), token) {
					t.Fatalf("the error shows the credentials: %v", err)
				}
			}
		})
	}
	for in, want := range map[string]string{
		"nats://u:p@h:4222":                    "nats://h:4222",
		"nats://tok@h:4222, tls://u:p@h2:4222": "nats://h:4222,tls://h2:4222",
		"nats://h:4222":                        "nats://h:4222",
		"nats://u:p%zz@h:4222":                 "nats://h:4222", // not a URL Go parses
	} {
		if got := natskv.Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBucketsRecreated: a server restarted without its data (memory
// storage) gets its buckets again on the next calls.
func TestBucketsRecreated(t *testing.T) {
	port := freePort(t)
	ns := startNATS(t, port, t.TempDir())
	s, err := natskv.Open(context.Background(), ns.url, natskv.Options{MemoryStorage: true, OpTimeout: 2 * time.Second, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.PutStep(ctx, &warm.StepEntry{RunID: "r", StepID: "a"}); err != nil {
		t.Fatal(err)
	}
	ns.stop(t, syscall.SIGKILL)
	startNATSAt(t, port, t.TempDir())
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.PutStep(ctx, &warm.StepEntry{RunID: "r", StepID: "b"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("buckets not recreated within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	steps, err := s.ListSteps(ctx, "r")
	if err != nil || len(steps) != 1 || steps[0].StepID != "b" {
		t.Fatalf("ListSteps after recreation = %+v, %v", steps, err)
	}
}

func TestEmbeddedPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: dir}, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Version: 3}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: dir}, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.GetRun(ctx, "r")
	if err != nil || e.Version != 3 {
		t.Fatalf("GetRun after reopening the embedded store = %+v, %v", e, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://x:1", "nats://", "::", "127.0.0.1:4222"} {
		if _, err := natskv.Open(ctx, u, natskv.Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
	if _, err := natskv.Open(ctx, "nats://127.0.0.1:1", natskv.Options{Prefix: "a.b"}); err == nil || !strings.Contains(err.Error(), "Prefix") {
		t.Errorf("Open with prefix a.b = %v, want an error naming Prefix", err)
	}
	if _, err := natskv.StartServer(natskv.EmbeddedOptions{}); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("StartServer without Dir = %v, want an error naming Dir", err)
	}
	s, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: t.TempDir()}, natskv.Options{PresenceMaxAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutPresence(ctx, &warm.Presence{RunnerID: "x"}, 2*time.Minute); !errors.Is(err, warm.ErrInvalid) {
		t.Errorf("PutPresence with ttl above PresenceMaxAge = %v, want ErrInvalid", err)
	}
}

// --- nats-server subprocesses ---

type natsProc struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

// natsBinary finds nats-server: $STARFLOW_NATS_SERVER, PATH, /usr/sbin.
// Missing: the test fails under CI and is skipped (saying so) elsewhere.
func natsBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("STARFLOW_NATS_SERVER"); b != "" {
		return b
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nats-server not found (set STARFLOW_NATS_SERVER); required under CI")
	}
	t.Skip("SKIP: nats-server not found (set STARFLOW_NATS_SERVER); these tests run under CI")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startNATS(t *testing.T, port int, dir string) *natsProc { return startNATSAt(t, port, dir) }

// startNATSAt starts nats-server -js on 127.0.0.1:port storing in dir
// (with extra arguments, e.g. --user and --pass) and waits until it
// accepts connections; it is killed at the test's end.
func startNATSAt(t *testing.T, port int, dir string, extra ...string) *natsProc {
	t.Helper()
	if port == 4222 {
		t.Fatal("refusing to start a test server on the shared port 4222")
	}
	bin := natsBinary(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", dir}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &natsProc{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	p.exited = exited
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("nats-server exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server on port %d not accepting within 20s: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *natsProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server did not exit within 30s of %v", sig)
	}
}

// TestEmbeddedDirLocked: a second embedded server on the same store
// directory is refused (it would write the same files); after the first
// stops, the directory is free again.
func TestEmbeddedDirLocked(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: dir}, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: dir}, natskv.Options{}); err == nil {
		b.Close()
		a.Close()
		t.Fatal("a second embedded server opened the same store directory")
	} else if !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v, want an in-use error naming %s", err, dir)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: dir}, natskv.Options{})
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	b.Close()
}
