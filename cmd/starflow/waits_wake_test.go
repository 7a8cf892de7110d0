package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// notifySink records the notify requests of waits.
type notifySink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newNotifySink(t *testing.T) *notifySink {
	n := &notifySink{}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		n.mu.Lock()
		n.bodies = append(n.bodies, body)
		n.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// token waits for the first notify and returns its token.
func (n *notifySink) token(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		if len(n.bodies) > 0 {
			tok, _ := n.bodies[0]["token"].(string)
			n.mu.Unlock()
			if tok == "" {
				t.Fatalf("notify without a token: %v", n.bodies[0])
			}
			return tok
		}
		n.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no notify request within 60 s")
	return ""
}

const approvalWorkflow = `name: approval
steps:
  - id: ask
    wait:
      signal: approve
      notify: {url: "%s"}
output: "${{ steps.ask.output }}"
`

// startDev starts `starflow dev` in dir with env and returns a stop
// function.
func startDev(t *testing.T, dir string, env []string, args ...string) func() {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"dev", "--addr", "127.0.0.1:0", "--poll-interval", "50ms"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// TestCLIWakeByToken: a worker delivers a wait's token by notify; `starflow
// wake TOKEN --payload` resumes the run with the payload; the same token a
// second time is refused as closed (exit 4), a tampered one as invalid
// (exit 3), and a token checked against another key ring as invalid.
// Keys come from STARFLOW_WAKE_KEYS for the runner and the CLI alike.
func TestCLIWakeByToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "approval.yaml", strings.Replace(approvalWorkflow, "%s", sink.srv.URL, 1))
	keys := "STARFLOW_WAKE_KEYS=k1:" + strings.Repeat("QUJD", 11) // 33 bytes
	if r := starflowCmd(t, dir, nil, "apply", "approval.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	enq := starflowCmd(t, dir, nil, "enqueue", "approval", "--db", "w.db")
	id := strings.TrimSpace(enq.stdout)
	startDev(t, dir, []string{keys}, "--db", "w.db")
	tok := sink.token(t)

	other := starflowCmd(t, dir, []string{"STARFLOW_WAKE_KEYS=k2:" + strings.Repeat("WFla", 11)}, "wake", tok, "--db", "w.db", "--payload", `{"ok": 1}`)
	if other.code != exitTokenInvalid || !strings.Contains(other.stderr, "token invalid") {
		t.Fatalf("wake with another key ring: exit %d %q; want %d, token invalid", other.code, other.stderr, exitTokenInvalid)
	}
	if r := starflowCmd(t, dir, nil, "migrate", "--db", "other.db"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	if r := starflowCmd(t, dir, []string{keys}, "wake", tok, "--db", "other.db"); r.code != exitTokenInvalid || !strings.Contains(r.stderr, "no wait in this store has this token") {
		t.Fatalf("a good token against another store: exit %d %q", r.code, r.stderr)
	}
	tampered := tok[:len(tok)-3] + flip(tok[len(tok)-3:])
	if r := starflowCmd(t, dir, []string{keys}, "wake", tampered, "--db", "w.db"); r.code != exitTokenInvalid || !strings.Contains(r.stderr, "token invalid") {
		t.Fatalf("tampered token: exit %d %q", r.code, r.stderr)
	}
	ok := starflowCmd(t, dir, []string{keys}, "wake", tok, "--db", "w.db", "--payload", `{"approved": "yes"}`)
	if ok.code != 0 || !regexp.MustCompile(`^woke wait \S+ \(step ask\) of run `+id).MatchString(ok.stdout) {
		t.Fatalf("wake: exit %d\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
	again := starflowCmd(t, dir, []string{keys}, "wake", tok, "--db", "w.db", "--payload", `{}`)
	if again.code != exitWaitClosed || !strings.HasPrefix(again.stderr, "starflow: wait closed or token expired: the wait was already woken") ||
		strings.Count(again.stderr, "\n") != 1 || strings.Contains(again.stderr, "store:") || strings.Contains(again.stderr, "(410)") {
		t.Fatalf("second wake: exit %d %q; want %d, wait closed", again.code, again.stderr, exitWaitClosed)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "w.db", "--json")
		if strings.Contains(r.stdout, `"status": "succeeded"`) {
			if !strings.Contains(r.stdout, `"approved": "yes"`) {
				t.Fatalf("output is not the wake payload: %s", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not resumed after the wake: %s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waits := starflowCmd(t, dir, nil, "runs", "waits", id, "--db", "w.db", "--json")
	var ws []map[string]any
	if err := json.Unmarshal([]byte(waits.stdout), &ws); err != nil || len(ws) != 1 || ws[0]["status"] != "woken" || ws[0]["kind"] != "signal" {
		t.Fatalf("runs waits --json: %v %s", err, waits.stdout)
	}
}

// flip changes every character of s (keeping the base64url alphabet).
func flip(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

const sessionGCWorkflow = `name: sessions
steps:
  - id: keep
    session_write: {session: "s1", key: "short", value: 1, keep_until: "1s"}
  - id: keep-long
    session_write: {session: "s1", key: "long", value: 2, keep_until: "1h"}
`

// TestCLIGC: `starflow gc` removes the session variables whose keep_until
// passed, says how many, and leaves live ones.
func TestCLIGC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "sessions.yaml", sessionGCWorkflow)
	if r := starflowCmd(t, dir, nil, "run", "sessions.yaml", "--db", "gc.db"); r.code != 0 {
		t.Fatalf("run: %s%s", r.stdout, r.stderr)
	}
	time.Sleep(1500 * time.Millisecond) // past the short keep_until
	r := starflowCmd(t, dir, nil, "gc", "--db", "gc.db")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "gc: removed 1 session variable" {
		t.Fatalf("gc: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = starflowCmd(t, dir, nil, "gc", "--db", "gc.db")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "gc: nothing was due" {
		t.Fatalf("second gc: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}
