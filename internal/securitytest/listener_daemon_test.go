package securitytest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// Helpers of listener_test.go and numbers_test.go: a started starflow
// process whose stderr is watched for lines, the CLI run to completion,
// and a notify receiver.

// watchedLog is a process's stderr: it keeps everything written and
// signals each registered pattern the first time it matches.
type watchedLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	waits []*logWait
}

type logWait struct {
	re   *regexp.Regexp
	ch   chan string // gets the first submatch (or the match), then closes
	done bool
}

func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.check()
	return len(p), nil
}

// check signals the waits whose pattern now matches. w.mu is held.
func (w *watchedLog) check() {
	for _, lw := range w.waits {
		if lw.done {
			continue
		}
		if m := lw.re.FindStringSubmatch(w.buf.String()); m != nil {
			lw.done = true
			lw.ch <- m[len(m)-1]
			close(lw.ch)
		}
	}
}

// match returns a channel that gets re's first submatch (or whole match)
// once the log contains it.
func (w *watchedLog) match(re *regexp.Regexp) <-chan string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lw := &logWait{re: re, ch: make(chan string, 1)}
	w.waits = append(w.waits, lw)
	w.check()
	return lw.ch
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// starflowDaemon is a started `starflow dev` or `starflow server`.
type starflowDaemon struct {
	cmd    *exec.Cmd
	log    *watchedLog
	exited chan struct{}
	// base is the listener's URL, http://127.0.0.1:PORT.
	base string
}

var (
	listeningRe = regexp.MustCompile(`listening on (http://\S+)`)
	startedRe   = regexp.MustCompile(`(?m)^(?:dev|server) \S+ started on `)
)

// startStarflowDaemon starts the binary with args (a dev or server
// command with --addr 127.0.0.1:0) in dir and waits until it listens and
// has started. The process is killed at the end of t; its stderr is
// logged when t failed.
func startStarflowDaemon(t *testing.T, dir string, args ...string) *starflowDaemon {
	t.Helper()
	return startStarflowDaemonEnv(t, dir, nil, args...)
}

// startStarflowDaemonEnv is startStarflowDaemon with env added to the
// test's environment (e.g. STARFLOW_WAKE_KEYS, which a process on
// PostgreSQL needs).
func startStarflowDaemonEnv(t *testing.T, dir string, env []string, args ...string) *starflowDaemon {
	t.Helper()
	d := &starflowDaemon{log: &watchedLog{}, exited: make(chan struct{})}
	d.cmd = exec.Command(Binary(t), args...)
	d.cmd.Dir = dir
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = d.log
	listening, started := d.log.match(listeningRe), d.log.match(startedRe)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("stderr of starflow %v:\n%s", args, d.log.String())
		}
	})
	timeout := time.After(60 * time.Second)
	for _, ch := range []<-chan string{listening, started} {
		select {
		case s := <-ch:
			if d.base == "" {
				d.base = s
			}
		case <-d.exited:
			t.Fatalf("starflow %v exited before starting:\n%s", args, d.log.String())
		case <-timeout:
			t.Fatalf("starflow %v did not start within 60 s:\n%s", args, d.log.String())
		}
	}
	return d
}

// addr is the listener's HOST:PORT.
func (d *starflowDaemon) addr() string { return d.base[len("http://"):] }

// starflowCLI runs the binary with args in dir to completion (see
// runStarflow).
func starflowCLI(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	return runStarflow(t, dir, nil, args...)
}

// writeTestFile writes content to dir/name and returns the path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// notifyReceiver is an HTTP server receiving wait notify requests; each
// body arrives on bodies.
type notifyReceiver struct {
	url    string
	bodies chan map[string]any
}

func newNotifyReceiver(t *testing.T) *notifyReceiver {
	t.Helper()
	n := &notifyReceiver{bodies: make(chan map[string]any, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		n.bodies <- body
	}))
	t.Cleanup(srv.Close)
	n.url = srv.URL
	return n
}

// next waits for the next notify request's body.
func (n *notifyReceiver) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case b := <-n.bodies:
		return b
	case <-time.After(60 * time.Second):
		t.Fatal("no notify request within 60 s")
		return nil
	}
}
