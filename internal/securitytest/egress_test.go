package securitytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow/internal/egress/egresstest"
)

// Issue 10 item 2: the egress policy of service_call and notify, tried
// with the real binary (starflow run), real HTTP servers and the SQLite
// file it writes.

const refusedMetadata = "egress to 169.254.169.254 refused by policy"

// refusalBudgetMS is how long a refused step may take (the issue's
// bound): the refusal happens before connect.
const refusalBudgetMS = 100

// egressServer is a loopback HTTP server that counts the connections it
// accepted and records every request's headers.
type egressServer struct {
	*httptest.Server
	conns   atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	urls    []string
}

func newEgressServer(t *testing.T, h http.HandlerFunc) *egressServer {
	t.Helper()
	s := &egressServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.urls = append(s.urls, r.URL.String())
		s.mu.Unlock()
		if h == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *egressServer) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// egressRun is one `starflow run` of a definition in a fresh folder.
type egressRun struct {
	cliResult
	db string
}

// runEgress writes def, runs it with `starflow run` (input as JSON), the
// extra args and env, and returns what it printed and its database.
func runEgress(t *testing.T, def string, input map[string]any, env []string, args ...string) egressRun {
	t.Helper()
	dir := t.TempDir()
	wf := writeFile(t, dir, "wf.yaml", def)
	db := filepath.Join(dir, "starflow.db")
	if input == nil {
		input = map[string]any{}
	}
	in, _ := json.Marshal(input)
	all := append([]string{"run", wf, "--db", db, "--input", string(in)}, args...)
	return egressRun{runStarflow(t, dir, env, all...), db}
}

// stepRow reads a step instance's ledger row (first attempt, root scope).
type stepRow struct {
	status     string
	tries      int
	durationMS int64
	err        string
}

func (r egressRun) step(t *testing.T, id string) stepRow {
	t.Helper()
	var s stepRow
	queryRow(t, r.db, `SELECT status, tries, coalesce(duration_ms, -1), coalesce(error, '') FROM workflow_steps WHERE step_id = '`+id+`'`,
		&s.status, &s.tries, &s.durationMS, &s.err)
	return s
}

func (r egressRun) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	queryRow(t, r.db, query, &n)
	return n
}

// wantRefusedAtOnce checks a run whose step `call` was refused: the run
// failed on its first attempt, the step after one try, within the budget,
// with no retry.
func (r egressRun) wantRefusedAtOnce(t *testing.T, wantErr func(string) bool) {
	t.Helper()
	if r.code != 1 {
		t.Fatalf("want exit 1:\n%s", r.cliResult)
	}
	s := r.step(t, "call")
	if s.status != "failed" || s.tries != 1 || !wantErr(s.err) {
		t.Fatalf("step call: %s after %d tries: %q\n%s", s.status, s.tries, s.err, r.cliResult)
	}
	if s.durationMS < 0 || s.durationMS >= refusalBudgetMS {
		t.Fatalf("the refused step took %d ms (budget %d ms)", s.durationMS, refusalBudgetMS)
	}
	var status string
	var attempt int
	queryRow(t, r.db, `SELECT status, attempt FROM workflow_runs`, &status, &attempt)
	if status != "failed" || attempt != 1 {
		t.Fatalf("run %s at attempt %d, want failed at attempt 1 (no run-level retry)", status, attempt)
	}
	if n := r.count(t, `SELECT count(*) FROM workflow_run_events WHERE event_type = 'node_retry'`); n != 0 {
		t.Fatalf("%d node_retry events for a refusal", n)
	}
	if !strings.Contains(r.stderr+r.stdout, s.err) {
		t.Fatalf("the command did not say %q:\n%s", s.err, r.cliResult)
	}
}

func exactly(want string) func(string) bool { return func(s string) bool { return s == want } }

// callDef is a definition whose step `call` GETs input.url, with retries
// at both levels that a refusal must not use.
const callDef = `name: egress-call
max_attempts: 3
steps:
  - id: call
    service_call: {url: "${{ input.url }}"}
    retry_policy: {max_attempts: 5, initial_interval: 1ms}
  - id: after
    context_set: {reached: true}
`

// TestEgressMetadataRefused: a service_call to a cloud-metadata address,
// in each of its forms, fails at once without a retry.
func TestEgressMetadataRefused(t *testing.T) {
	t.Parallel()
	for url, addr := range map[string]string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/": "169.254.169.254",
		"http://[::ffff:169.254.169.254]/latest/meta-data/":                 "169.254.169.254",
		"http://[fd00:ec2::254]/latest/meta-data/":                          "fd00:ec2::254",
		"http://100.100.100.200/latest/meta-data/":                          "100.100.100.200",
		"http://169.254.170.2/v2/credentials/":                              "169.254.170.2",
	} {
		t.Run(url, func(t *testing.T) {
			t.Parallel()
			r := runEgress(t, callDef, map[string]any{"url": url}, nil)
			r.wantRefusedAtOnce(t, exactly("egress to "+addr+" refused by policy"))
		})
	}
}

// TestEgressNameResolvingToRefusedAddress: the check runs after DNS
// resolution. `localhost` resolves to loopback; denying loopback by flag
// (or by environment) refuses the name, and the listening server never
// sees a connection. (A name resolving to 169.254.169.254 is tested with
// a real DNS server in internal/egress.)
func TestEgressNameResolvingToRefusedAddress(t *testing.T) {
	t.Parallel()
	srv := newEgressServer(t, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	url := "http://localhost:" + port + "/internal"
	refusedLoopback := func(s string) bool {
		return s == "egress to 127.0.0.1 refused by policy" || s == "egress to ::1 refused by policy"
	}
	r := runEgress(t, callDef, map[string]any{"url": url}, nil, "--egress-deny", "127.0.0.0/8", "--egress-deny", "::1/128")
	r.wantRefusedAtOnce(t, refusedLoopback)
	r = runEgress(t, callDef, map[string]any{"url": url}, []string{"STARFLOW_EGRESS_DENY=127.0.0.0/8, ::1/128"})
	r.wantRefusedAtOnce(t, refusedLoopback)
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("the denied server accepted %d connections", n)
	}
	// Without the deny, loopback is allowed by default.
	r = runEgress(t, callDef, map[string]any{"url": url}, nil)
	if r.code != 0 || srv.conns.Load() == 0 {
		t.Fatalf("loopback by default:\n%s", r.cliResult)
	}
}

// TestEgressLoopbackRedirectToMetadata: a service on loopback (allowed)
// redirects to the metadata address; the redirect is refused at its dial.
func TestEgressLoopbackRedirectToMetadata(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		srv := newEgressServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", status)
		})
		r := runEgress(t, callDef, map[string]any{"url": srv.URL + "/start"}, nil)
		r.wantRefusedAtOnce(t, exactly(refusedMetadata))
		if n := len(srv.requests()); n != 1 {
			t.Fatalf("the redirecting service got %d requests, want 1 (no retry)", n)
		}
	}
}

// TestEgressCrossOriginRedirect: a redirect to another origin (another
// port, another host name) carries none of the headers the definition or
// the engine set, and no Referer (the first URL has a secret in its
// query string); a same-origin redirect keeps them, without Referer.
func TestEgressCrossOriginRedirect(t *testing.T) {
	t.Parallel()
	const token = "egress-test-token-5f2c9a7e1d"
	other := newEgressServer(t, nil)
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	first := newEgressServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/cross", http.StatusFound)
		case "/cross":
			http.Redirect(w, r, "http://localhost:"+otherPort+"/landing", http.StatusFound)
		}
	})
	def := `name: egress-redirect
secrets: [EGRESS_TOKEN]
steps:
  - id: call
    service_call:
      url: "${{ input.url }}"
      headers:
        Authorization: "${{ 'Bearer ' + secrets.EGRESS_TOKEN }}"
        X-Api-Key: "${{ secrets.EGRESS_TOKEN }}"
        X-Custom: static-header-value
      query: {token: "${{ secrets.EGRESS_TOKEN }}"}
`
	r := runEgress(t, def, map[string]any{"url": first.URL + "/same"}, []string{"EGRESS_TOKEN=" + token})
	if r.code != 0 {
		t.Fatalf("run:\n%s", r.cliResult)
	}
	firstReqs := first.requests()
	if len(firstReqs) != 2 {
		t.Fatalf("the first origin got %d requests, want 2", len(firstReqs))
	}
	same := firstReqs[1]
	if same.Get("X-Custom") != "static-header-value" || same.Get("Authorization") != "Bearer "+token || same.Get("Idempotency-Key") == "" {
		t.Errorf("a same-origin redirect lost the definition's headers: %v", same)
	}
	if v := same.Get("Referer"); v != "" {
		t.Errorf("same origin: Referer %q", v)
	}
	reqs := other.requests()
	if len(reqs) != 1 {
		t.Fatalf("the other origin got %d requests, want 1", len(reqs))
	}
	for _, k := range []string{"Authorization", "X-Api-Key", "X-Custom", "Idempotency-Key", "Starflow-Fencing-Token", "Referer", "Cookie"} {
		if v := reqs[0].Get(k); v != "" {
			t.Errorf("the other origin got %s: %q", k, v)
		}
	}
	for k, vs := range reqs[0] {
		if strings.Contains(strings.Join(vs, " "), token) {
			t.Errorf("the other origin got the token in %s", k)
		}
	}
}

// TestEgressRedirectLimit: five redirects are followed, a sixth is not.
func TestEgressRedirectLimit(t *testing.T) {
	t.Parallel()
	// /r/STOP/N redirects to /r/STOP/N+1 until N = STOP.
	srv := newEgressServer(t, func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/")
		stop, _ := strconv.Atoi(parts[2])
		n, _ := strconv.Atoi(parts[3])
		if n < stop {
			http.Redirect(w, r, fmt.Sprintf("/r/%d/%d", stop, n+1), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "landed")
	})
	def := `name: egress-redirects
max_attempts: 3
steps:
  - id: five
    service_call: {url: "${{ input.base + '/r/5/0' }}"}
  - id: call
    service_call: {url: "${{ input.base + '/r/6/0' }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms}
`
	r := runEgress(t, def, map[string]any{"base": srv.URL}, nil)
	if s := r.step(t, "five"); s.status != "succeeded" {
		t.Fatalf("five redirects: %s %q\n%s", s.status, s.err, r.cliResult)
	}
	r.wantRefusedAtOnce(t, func(s string) bool { return strings.HasSuffix(s, ": stopped after 5 redirects") })
	if n := len(srv.requests()); n != 6+6 {
		t.Fatalf("%d requests, want 6 (five redirects followed) + 6 (the sixth redirect not followed)", n)
	}
}

// TestEgressAllowList: a link-local address (refused by default, as
// 169.254.0.0/16 is) is reached once allow-listed by flag or environment.
// The server is the test's own, on this machine's fe80:: address: the
// test never dials a metadata service.
func TestEgressAllowList(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	_, base := egresstest.LinkLocalServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "link-local ok")
	}))
	in := map[string]any{"url": base + "/"}
	r := runEgress(t, callDef, in, nil)
	r.wantRefusedAtOnce(t, func(s string) bool {
		return strings.HasPrefix(s, "egress to fe80:") && strings.HasSuffix(s, " refused by policy")
	})
	if hits.Load() != 0 {
		t.Fatal("the link-local server was reached by default")
	}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{args: []string{"--egress-allow", "fe80::/10"}},
		{env: []string{"STARFLOW_EGRESS_ALLOW=10.9.0.0/16,fe80::/10"}},
		{args: []string{"--egress-allow", "fe80::/10", "--egress-deny", "fe80::/10"}}, // allow wins
	} {
		before := hits.Load()
		r := runEgress(t, callDef, in, c.env, c.args...)
		if r.code != 0 || hits.Load() != before+1 {
			t.Fatalf("allow-listed (env %v, args %v):\n%s", c.env, c.args, r.cliResult)
		}
	}
}

// TestEgressNotifyRefused: a wait whose notify URL is a metadata address
// fails at once, before any token exists.
func TestEgressNotifyRefused(t *testing.T) {
	t.Parallel()
	def := `name: egress-notify
max_attempts: 3
steps:
  - id: call
    wait:
      signal: approve
      notify: {url: "http://169.254.169.254/latest/meta-data/", headers: {X-Hook: hook-value}}
`
	r := runEgress(t, def, nil, nil)
	r.wantRefusedAtOnce(t, exactly(refusedMetadata))
	if n := r.count(t, `SELECT count(*) FROM workflow_waits`); n != 0 {
		t.Fatalf("%d waits registered", n)
	}
}

// TestEgressFlagErrors: every command that runs runs or sends notifies
// takes the flags, and refuses an invalid CIDR clearly, before starting.
func TestEgressFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, dir, "wf.yaml", callDef)
	db := filepath.Join(dir, "starflow.db")
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", wf, "--db", db, "--egress-allow", "10.0.0.0/33"}, nil, `--egress-allow "10.0.0.0/33" is not a CIDR`},
		{[]string{"worker", "--db", db, "--egress-deny", "metadata.internal"}, nil, `--egress-deny "metadata.internal" is not a CIDR`},
		{[]string{"server", "--db", db, "--addr", "127.0.0.1:0", "--egress-allow", "169.254.0.0/16,300.1.1.1/8"}, nil, `--egress-allow "300.1.1.1/8" is not a CIDR`},
		{[]string{"dev", "--db", db, "--addr", "127.0.0.1:0", "--egress-deny", "fe80::1%eth0"}, nil, `--egress-deny "fe80::1%eth0" is not a CIDR`},
		{[]string{"run", wf, "--db", db}, []string{"STARFLOW_EGRESS_DENY=10.0.0.0/8,bogus"}, `STARFLOW_EGRESS_DENY "bogus" is not a CIDR`},
		{[]string{"worker", "--db", db}, []string{"STARFLOW_EGRESS_ALLOW=::/129"}, `STARFLOW_EGRESS_ALLOW "::/129" is not a CIDR`},
	} {
		r := runStarflow(t, dir, c.env, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "e.g. 169.254.0.0/16") {
			t.Errorf("starflow %v (env %v): want an error saying %q\n%s", c.args, c.env, c.want, r)
		}
	}
	for _, cmd := range []string{"run", "worker", "server", "dev"} {
		r := runStarflow(t, dir, nil, cmd, "--help")
		if !strings.Contains(r.stdout, "--egress-allow") || !strings.Contains(r.stdout, "--egress-deny") {
			t.Errorf("starflow %s --help lists no egress flags:\n%s", cmd, r.stdout)
		}
	}
}
