package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// first waits for the first notify request and returns its body.
func (n *notifySink) first(t *testing.T) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		if len(n.bodies) > 0 {
			b := n.bodies[0]
			n.mu.Unlock()
			return b
		}
		n.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no notify request within 60 s")
	return nil
}

func postJSON(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

// TestDevWakeURL: `starflow dev` on a free port sends notify receivers a
// wake_url naming its own listener; POSTing a payload to it wakes the
// wait (200 with the woken wait) and the run succeeds with that payload
// as the wait step's output; the same wake_url again is 410, a tampered
// token 401, a body that is not JSON 400 — each a problem document.
func TestDevWakeURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "approval.yaml", strings.Replace(approvalWorkflow, "%s", sink.srv.URL, 1))
	if r := starflowCmd(t, dir, nil, "apply", "approval.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	id := strings.TrimSpace(starflowCmd(t, dir, nil, "enqueue", "approval", "--db", "w.db").stdout)
	d := startDaemon(t, dir, nil, "dev", "--db", "w.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms")
	base := d.waitStarted(t)
	if base == "" || strings.HasSuffix(base, ":0") {
		t.Fatalf("listener address %q", base)
	}

	body := sink.first(t)
	tok, _ := body["token"].(string)
	wakeURL, _ := body["wake_url"].(string)
	if tok == "" || wakeURL != base+"/wake/"+tok {
		t.Fatalf("notify wake_url %q, want %s/wake/<token %q>", wakeURL, base, tok)
	}
	if !strings.Contains(d.stderr.String(), "wake URL "+base+"/wake/{token}") {
		t.Fatalf("dev does not print its wake URL:\n%s", d.stderr.String())
	}

	tampered := base + "/wake/" + tok[:len(tok)-3] + flip(tok[len(tok)-3:])
	if code, ctype, b := postJSON(t, tampered, `{"approved": "forged"}`); code != 401 || ctype != "application/problem+json" {
		t.Fatalf("tampered token: %d %s %s", code, ctype, b)
	}
	if code, _, b := postJSON(t, wakeURL, `{"approved": `); code != 400 {
		t.Fatalf("body not JSON: %d %s", code, b)
	}

	code, ctype, b := postJSON(t, wakeURL, `{"approved": "yes", "by": "ops"}`)
	if code != 200 || ctype != "application/json" {
		t.Fatalf("wake: %d %s %s", code, ctype, b)
	}
	var woken map[string]any
	if err := json.Unmarshal([]byte(b), &woken); err != nil {
		t.Fatal(err)
	}
	if woken["run_id"] != id || woken["step_id"] != "ask" || woken["status"] != "woken" || woken["id"] != body["wait_id"] {
		t.Fatalf("wake answer %s; want run %s, step ask, woken, wait %v", b, id, body["wait_id"])
	}

	if code, ctype, b := postJSON(t, wakeURL, `{"approved": "again"}`); code != 410 || ctype != "application/problem+json" {
		t.Fatalf("second wake: %d %s %s", code, ctype, b)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "w.db", "--json")
		var run struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal([]byte(r.stdout), &run)
		if run.Status == "succeeded" {
			var out map[string]any
			if err := json.Unmarshal(run.Output, &out); err != nil || out["approved"] != "yes" || out["by"] != "ops" || len(out) != 2 {
				t.Fatalf("output %s is not the wake payload", run.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not resumed after the wake: %s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop(t)
}

// TestWakeURLFlag: --wake-url (and STARFLOW_WAKE_URL) replace the
// listener's wake URL — here a worker, which has no listener, so its
// notify wake_url comes from the flag alone; without it a worker's
// wake_url is empty. A template without {token} or not http(s) is
// refused before anything starts.
func TestWakeURLFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string // "{token}" replaced
	}{
		{"flag", nil, []string{"--wake-url", "https://starflow.example.com/api/wake/{token}?src=notify"}, "https://starflow.example.com/api/wake/{token}?src=notify"},
		{"env", []string{"STARFLOW_WAKE_URL=http://10.0.0.7:9000/wake/{token}"}, nil, "http://10.0.0.7:9000/wake/{token}"},
		{"none", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sink := newNotifySink(t)
			writeFile(t, dir, "approval.yaml", strings.Replace(approvalWorkflow, "%s", sink.srv.URL, 1))
			if r := starflowCmd(t, dir, nil, "apply", "approval.yaml", "--db", "w.db"); r.code != 0 {
				t.Fatalf("apply: %s", r.stderr)
			}
			if r := starflowCmd(t, dir, nil, "enqueue", "approval", "--db", "w.db"); r.code != 0 {
				t.Fatalf("enqueue: %s", r.stderr)
			}
			startDaemon(t, dir, tc.env, append([]string{"worker", "--db", "w.db", "--poll-interval", "50ms"}, tc.args...)...)
			body := sink.first(t)
			tok, _ := body["token"].(string)
			want := strings.ReplaceAll(tc.want, "{token}", tok)
			if tok == "" || body["wake_url"] != want {
				t.Fatalf("wake_url %q, want %q", body["wake_url"], want)
			}
		})
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{nil, []string{"--wake-url", "https://starflow.example.com/wake/"}, "must contain {token}"},
		{[]string{"STARFLOW_WAKE_URL=ftp://host/{token}"}, nil, "absolute http:// or https://"},
		{nil, []string{"--wake-url", "/wake/{token}"}, "absolute http:// or https://"},
	} {
		r := starflowCmd(t, dir, tc.env, append([]string{"dev", "--db", "x.db", "--addr", "127.0.0.1:0"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.msg) || !strings.Contains(r.stderr, "--wake-url") {
			t.Fatalf("dev %v %v: exit %d %q; want an error saying %q", tc.env, tc.args, r.code, r.stderr, tc.msg)
		}
	}
}

// TestServerWakeRoute: a worker (no --wake-url) notifies an empty
// wake_url with the token; `starflow server`, which runs no runner,
// serves POST /wake/{token} on its own listener, prints its wake URL, and
// the wake it applies is continued by the worker with the payload.
func TestServerWakeRoute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "approval.yaml", strings.Replace(approvalWorkflow, "%s", sink.srv.URL, 1))
	if r := starflowCmd(t, dir, nil, "apply", "approval.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	id := strings.TrimSpace(starflowCmd(t, dir, nil, "enqueue", "approval", "--db", "w.db").stdout)
	startDaemon(t, dir, nil, "worker", "--db", "w.db", "--poll-interval", "50ms")
	body := sink.first(t)
	tok, _ := body["token"].(string)
	if tok == "" || body["wake_url"] != "" {
		t.Fatalf("worker notify: token %q wake_url %q; want a token and an empty wake_url", tok, body["wake_url"])
	}
	srv := startDaemon(t, dir, nil, "server", "--db", "w.db", "--addr", "127.0.0.1:0")
	base := srv.waitStarted(t)
	if base == "" || !strings.Contains(srv.stderr.String(), "wake URL "+base+"/wake/{token}") {
		t.Fatalf("server listener %q; stderr:\n%s", base, srv.stderr.String())
	}
	if code, _, b := postJSON(t, base+"/wake/"+tok, `"ship it"`); code != 200 || !strings.Contains(b, id) {
		t.Fatalf("wake via server: %d %s", code, b)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "w.db", "--json")
		var run struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal([]byte(r.stdout), &run)
		if run.Status == "succeeded" {
			if string(run.Output) != `"ship it"` {
				t.Fatalf("output %s, want the payload", run.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not continued by the worker after the server's wake: %s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.stop(t)
}
