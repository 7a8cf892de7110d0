package securitytest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/httpserver"
)

// The HTTP listener of `starflow dev` and `starflow server` against a
// hostile HTTP client (issue 10 item 6): slow clients are disconnected, a
// DNS-rebinding page is refused, the health answer gives nothing of the
// database away, and one client cannot flood POST /wake/{token}.

// startDev starts `starflow dev` on a fresh SQLite file in a temporary
// folder with extra flags.
func startDev(t *testing.T, extra ...string) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"dev", "--db", "sec.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms"}, extra...)
	return startListener(t, dir, nil, args...), dir
}

// rawRequest sends one HTTP/1.1 request with the given Host over a new
// connection to addr and returns the response and its body.
func rawRequest(t *testing.T, addr, method, path, host string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestListenerSlowlorisDisconnected: a client that sends its request
// headers a byte at a time is disconnected once the header timeout
// (httpserver.ReadHeaderTimeoutDefault, 5 s) has run out, however
// steadily it sends; the listener keeps serving others meanwhile.
func TestListenerSlowlorisDisconnected(t *testing.T) {
	t.Parallel()
	d, _ := startDev(t)
	conn, err := net.Dial("tcp", d.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// The slow client's pace: a byte every 100 ms, forever.
		req := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\nX-Padding: " + strings.Repeat("a", 10_000)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := range len(req) {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				return
			}
		}
	}()
	// Meanwhile another client is served.
	res, err := http.Get(d.base + "/healthz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /healthz during the slow client: %v %v", res, err)
	}
	res.Body.Close()

	limit := httpserver.ReadHeaderTimeoutDefault + 3*time.Second
	_ = conn.SetReadDeadline(start.Add(limit))
	_, err = io.Copy(io.Discard, conn) // returns when the server closes
	elapsed := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the slow client was still connected after %s (header timeout %s)", elapsed, httpserver.ReadHeaderTimeoutDefault)
	}
	if elapsed < httpserver.ReadHeaderTimeoutDefault-time.Second {
		t.Fatalf("the slow client was cut after %s, before the header timeout (%s): something else closed it (%v)", elapsed, httpserver.ReadHeaderTimeoutDefault, err)
	}
	t.Logf("slow client disconnected after %s", elapsed.Round(time.Millisecond))
}

// TestListenerRefusesForeignHost: a request whose Host names another site
// — what a browser sends for a DNS-rebinding page whose name now resolves
// to 127.0.0.1 — is refused with a 403 problem document on every route,
// the wake route included, before anything else happens; the listener's
// own names (any port: a port forward changes it) and --allowed-host
// names are served.
func TestListenerRefusesForeignHost(t *testing.T) {
	t.Parallel()
	d, _ := startDev(t, "--allowed-host", "starflow.internal.example")
	_, port, _ := net.SplitHostPort(d.addr())
	for _, tc := range []struct {
		method, path, host string
		code               int
	}{
		{"GET", "/healthz", "evil.example:" + port, 403},
		{"GET", "/healthz", "evil.example", 403},
		{"GET", "/metrics", "rebind.evil.example:" + port, 403},
		{"GET", "/live/runners", "localhost.evil.example:" + port, 403},
		{"POST", "/wake/anything", "evil.example:" + port, 403},
		{"GET", "/healthz", "127.0.0.1:" + port, 200},
		{"GET", "/healthz", "localhost:" + port, 200},
		{"GET", "/healthz", "[::1]:" + port, 200},
		{"GET", "/healthz", "localhost:9000", 200},
		{"GET", "/healthz", "starflow.internal.example", 200},
		{"POST", "/wake/anything", "localhost:" + port, 401},
	} {
		res, body := rawRequest(t, d.addr(), tc.method, tc.path, tc.host)
		if res.StatusCode != tc.code {
			t.Errorf("%s %s with Host %s: %d %s, want %d", tc.method, tc.path, tc.host, res.StatusCode, body, tc.code)
			continue
		}
		if tc.code == 403 {
			var p map[string]any
			if err := json.Unmarshal([]byte(body), &p); err != nil || p["status"] != 403.0 || p["title"] != "host not allowed" ||
				res.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s with Host %s: not a problem document: %s", tc.method, tc.path, tc.host, body)
			}
		}
	}
	// The same through a client that dialled 127.0.0.1 for a page of
	// another origin.
	req, _ := http.NewRequest("GET", d.base+"/healthz", nil)
	req.Host = "attacker.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("Host attacker.example: %d, want 403", res.StatusCode)
	}
}

// TestListenerHealthzHidesDriverText: `starflow server` on PostgreSQL
// whose schema is dropped under it answers /healthz 503 with
// "cold store unreachable" and nothing of the driver's error — no
// SQLSTATE, relation, schema, user or database name — while its log has
// the details.
func TestListenerHealthzHidesDriverText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, conn, schema := pgSchema(t, "sec_health")
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	d := startListener(t, t.TempDir(), []string{"STARFLOW_WAKE_KEYS=listener:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
		"server", "--store", store, "--addr", "127.0.0.1:0")

	res, err := http.Get(d.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("healthz before: %d", res.StatusCode)
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	logged := d.stderr.match(regexp42P01)
	res, err = http.Get(d.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var h map[string]any
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("healthz answer is not JSON: %s", body)
	}
	if res.StatusCode != 503 || h["status"] != "unavailable" || h["store_error"] != "cold store unreachable" {
		t.Fatalf("healthz with the schema dropped: %d %s", res.StatusCode, body)
	}
	user := u.User.Username()
	for _, leak := range []string{"SQLSTATE", "42P01", "relation", "workflow_runs", schema, "does not exist", "pgx", "user=" + user, "database=", u.Host} {
		if strings.Contains(string(body), leak) {
			t.Errorf("healthz answer carries %q: %s", leak, body)
		}
	}
	select {
	case <-logged:
	case <-time.After(30 * time.Second):
		t.Fatalf("the driver's error is not in the log:\n%s", d.stderr.String())
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
}

var regexp42P01 = regexp.MustCompile(`health: the cold store did not answer.*SQLSTATE 42P01`)

// TestListenerWakeRateLimit: a burst of wakes from one client past
// --wake-burst gets 429 problem documents with Retry-After, without
// reaching the token check, while a second client (another source
// address, or another address a proxy on loopback names in
// --client-ip-header) is served as usual.
func TestListenerWakeRateLimit(t *testing.T) {
	t.Parallel()
	// 0.01/s: nothing refills during the test, however slow the machine.
	d, _ := startDev(t, "--wake-rate", "0.01", "--wake-burst", "5", "--client-ip-header", "X-Forwarded-For")
	post := func(client *http.Client, forwardedFor string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", d.base+"/wake/not-a-token", nil)
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	first := &http.Client{}
	for i := range 5 {
		if res := post(first, ""); res.StatusCode != 401 {
			t.Fatalf("wake %d of the burst: %d, want 401 (token checked)", i+1, res.StatusCode)
		}
	}
	for range 3 {
		req, _ := http.NewRequest("POST", d.base+"/wake/not-a-token", nil)
		res, err := first.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p map[string]any
		_ = json.Unmarshal(body, &p)
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		if res.StatusCode != 429 || secs < 1 || p["status"] != 429.0 || p["title"] != "too many requests" ||
			res.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("past the burst: %d Retry-After %q %s, want a 429 problem with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	}

	// A second client behind the same proxy, told apart by the proxy's header.
	for i := range 5 {
		if res := post(first, "203.0.113.9"); res.StatusCode != 401 {
			t.Fatalf("forwarded client's wake %d: %d, want 401 (unaffected)", i+1, res.StatusCode)
		}
	}
	// A second client with a source address of its own.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	if c, err := dialer.Dial("tcp", d.addr()); err != nil {
		t.Logf("no second loopback source address here (%v): the forwarded client stands for it", err)
	} else {
		c.Close()
		second := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
		defer second.CloseIdleConnections()
		for i := range 5 {
			if res := post(second, ""); res.StatusCode != 401 {
				t.Fatalf("client 127.0.0.2's wake %d: %d, want 401 (unaffected)", i+1, res.StatusCode)
			}
		}
	}
	if res := post(first, ""); res.StatusCode != 429 {
		t.Fatalf("the first client after the others: %d, still want 429", res.StatusCode)
	}
}
