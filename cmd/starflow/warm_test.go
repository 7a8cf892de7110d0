package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemon is a started `starflow dev|server|worker` process.
type daemon struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startDaemon(t *testing.T, dir string, env []string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	d := &daemon{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = d.stderr
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
			t.Logf("stderr of %v:\n%s", args, d.stderr.String())
		}
	})
	return d
}

var listeningLine = regexp.MustCompile(`listening on (http://\S+)`)

// waitStarted waits for the "… started on" line and returns the listener's
// base URL ("" when the process has none).
func (d *daemon) waitStarted(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.stderr.String(), " started on ") {
		select {
		case <-d.exited:
			t.Fatalf("exited before starting:\n%s", d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not started after 30s:\n%s", d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := listeningLine.FindStringSubmatch(d.stderr.String()); m != nil {
		return m[1]
	}
	return ""
}

func (d *daemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop after SIGTERM")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM:\n%s", code, d.stderr.String())
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDevListenerAndWarm: `starflow dev` (warm tier memory by default)
// serves /healthz (warm ok, empty outbox), /metrics (the drift signals,
// run counters, Go runtime), live views of the run it executed, and its
// presence; SIGTERM stops it with status 0.
func TestDevListenerAndWarm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	if r := starflowCmd(t, dir, nil, "apply", "three.yaml", "--db", "d.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	// STARFLOW_WARM makes the enqueue mirror its write too.
	r := starflowCmd(t, dir, []string{"STARFLOW_WARM=memory"}, "enqueue", "three", "--input", `{"n": 2}`, "--db", "d.db")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 36 {
		t.Fatalf("enqueue: %s %s", r.stdout, r.stderr)
	}
	d := startDaemon(t, dir, nil, "dev", "--db", "d.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms", "--presence-interval", "200ms")
	base := d.waitStarted(t)
	if base == "" || !strings.Contains(d.stderr.String(), "(warm tier: memory)") {
		t.Fatalf("dev did not listen or has no memory warm tier:\n%s", d.stderr.String())
	}

	var live struct {
		Run struct {
			Status  string `json:"status"`
			Version int64  `json:"version"`
		} `json:"run"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, base+"/live/runs/"+id)
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &live); err != nil {
				t.Fatal(err)
			}
			if live.Run.Status == "succeeded" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("live run never succeeded: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if live.Run.Version < 1 {
		t.Fatalf("live entry version %d", live.Run.Version)
	}
	if r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "d.db", "--json"); !strings.Contains(r.stdout, `"status": "succeeded"`) {
		t.Fatalf("cold: %s", r.stdout)
	}

	code, body := httpGet(t, base+"/healthz")
	var h map[string]any
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if h["warm"] != "ok" || h["store_ok"] != true || h["warm_reachable"] != true || h["outbox_pending"] != float64(0) {
		t.Fatalf("/healthz: %s", body)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, name := range []string{"starflow_outbox_pending{age=", "starflow_outbox_oldest_age_seconds", "starflow_warm_corrections_total{reason=",
		`starflow_runs_finished_total{outcome="succeeded"} 1`, "go_goroutines"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// Presence is published every --presence-interval: the run's end shows
	// in it at the next beat, not at once.
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body = httpGet(t, base+"/live/runners")
		if code == 200 && strings.Contains(body, `"runs_held": 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/live/runners: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := httpGet(t, base+"/live/runs/00000000-0000-0000-0000-000000000000"); code != 404 || !strings.Contains(body, `"status":404`) {
		t.Fatalf("unknown live run: %d %s", code, body)
	}
	d.stop(t)
}

// TestWarmFlagsRejected: bad --warm, a non-loopback --addr and inverted
// thresholds are refused with a message naming the flag; a worker has no
// listener unless --addr is given.
func TestWarmFlagsRejected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"dev", "--db", "x.db", "--warm", "redis://x"}, nil, `--warm "redis://x"`},
		{[]string{"dev", "--db", "x.db"}, []string{"STARFLOW_WARM=bogus"}, `--warm "bogus"`},
		{[]string{"server", "--db", "x.db", "--addr", "0.0.0.0:8480"}, nil, "not a loopback address"},
		{[]string{"dev", "--db", "x.db"}, []string{"STARFLOW_ADDR=10.1.2.3:80"}, "not a loopback address"},
		{[]string{"dev", "--db", "x.db", "--warm-health-warn", "5s", "--warm-health-critical", "1s"}, nil, "--warm-health-critical"},
		{[]string{"runs", "live", "some-id"}, nil, "no warm tier given"},
		{[]string{"runs", "live", "some-id", "--warm", "memory"}, nil, "inside the process"},
	} {
		r := starflowCmd(t, dir, tc.env, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q, want %q", tc.env, tc.args, r.code, r.stderr, tc.want)
		}
	}
	w := startDaemon(t, dir, nil, "worker", "--db", "w.db", "--warm", "memory")
	if base := w.waitStarted(t); base != "" {
		t.Fatalf("worker listens without --addr: %s", base)
	}
	w.stop(t)
}

// TestWarmURLCredentialsNeverShown: a NATS URL with a user and password
// (--warm nats://USER:PASSWORD@HOST:PORT) is shown without them — in the
// start line, the engine's log and `runs live`'s error — while the warm
// store it names does not answer.
func TestWarmURLCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := l.Addr().String()
	l.Close() // nothing answers there
	const password = "pw-6c1e9b3a7d"
	warmURL := "nats://starflow:" + password + "@" + hostPort
	dir := t.TempDir()
	w := startDaemon(t, dir, nil, "worker", "--db", "w.db", "--warm", warmURL, "-v")
	w.waitStarted(t)
	w.stop(t)
	live := starflowCmd(t, dir, nil, "runs", "live", "some-run", "--warm", warmURL)
	for what, out := range map[string]string{"worker": w.stderr.String(), "runs live": live.stdout + live.stderr} {
		if strings.Contains(out, password) {
			t.Errorf("%s shows the NATS password:\n%s", what, out)
		}
		if !strings.Contains(out, "nats://"+hostPort) {
			t.Errorf("%s does not name the warm tier nats://%s:\n%s", what, hostPort, out)
		}
	}
	if live.code == 0 {
		t.Errorf("runs live with no warm store answering: exit 0")
	}
}
