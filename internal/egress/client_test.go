package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/egress/egresstest"
)

// refusalBudget is how long a refused request may take: the refusal
// happens before connect, so it costs a socket and a check.
const refusalBudget = 100 * time.Millisecond

// countingServer is an httptest server that counts the connections it
// accepted and records the headers of every request.
type countingServer struct {
	*httptest.Server
	conns   atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
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

func (s *countingServer) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

func get(t *testing.T, c *http.Client, url string, header http.Header) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func wantRefused(t *testing.T, err error, addr string, elapsed time.Duration) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a refusal of %s", err, addr)
	}
	if want := "egress to " + addr + " refused by policy"; re.Error() != want {
		t.Fatalf("refusal %q, want %q", re.Error(), want)
	}
	if elapsed > refusalBudget {
		t.Fatalf("the refusal took %s (budget %s)", elapsed, refusalBudget)
	}
}

// TestClientRefusesBeforeConnect proves the refusal happens before
// connect: a listening server on a denied loopback address never sees a
// connection, while the same server answers a client that allows it.
func TestClientRefusesBeforeConnect(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, ok)
	start := time.Now()
	_, err := get(t, New(Config{Deny: prefixes(t, "127.0.0.0/8")}).Client(), srv.URL, nil)
	wantRefused(t, err, "127.0.0.1", time.Since(start))
	// Connections are accepted in order: once the allowed request is
	// answered, a connection made by the refused one would have been
	// accepted before it.
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	if _, err := get(t, c, srv.URL, nil); err != nil {
		t.Fatal(err)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("the server accepted %d connections, want 1 (the allowed request's)", n)
	}
}

func TestClientRefusesMetadata(t *testing.T) {
	t.Parallel()
	c := New(Config{}).Client()
	for url, addr := range map[string]string{
		"http://169.254.169.254/latest/meta-data/":  "169.254.169.254",
		"http://[::ffff:169.254.169.254]/":          "169.254.169.254",
		"http://[::ffff:a9fe:a9fe]:8080/":           "169.254.169.254",
		"http://[fd00:ec2::254]/latest/meta-data/":  "fd00:ec2::254",
		"http://100.100.100.200/latest/meta-data/":  "100.100.100.200",
		"https://[fe80::a9fe:a9fe]/computeMetadata": "fe80::a9fe:a9fe",
	} {
		start := time.Now()
		_, err := get(t, c, url, nil)
		wantRefused(t, err, addr, time.Since(start))
	}
}

// TestClientRefusesNameResolvingToMetadata: the check runs after DNS
// resolution, through Go's resolver and a real DNS server.
func TestClientRefusesNameResolvingToMetadata(t *testing.T) {
	t.Parallel()
	r := startDNS(t, map[string][]netip.Addr{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":   {netip.MustParseAddr("::ffff:169.254.169.254")},
		"ec2v6.test":    {netip.MustParseAddr("fd00:ec2::254")},
		"local.test":    {netip.MustParseAddr("127.0.0.1")},
	})
	c := New(Config{Resolver: r}).Client()
	defer c.CloseIdleConnections()
	for name, addr := range map[string]string{"metadata.test": "169.254.169.254", "mapped.test": "169.254.169.254", "ec2v6.test": "fd00:ec2::254"} {
		start := time.Now()
		_, err := get(t, c, "http://"+name+"/latest/meta-data/", nil)
		wantRefused(t, err, addr, time.Since(start))
	}
	// The same resolver gives an allowed address for another name.
	srv := newCountingServer(t, ok)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	if _, err := get(t, c, "http://local.test:"+port+"/", nil); err != nil {
		t.Fatalf("local.test: %v", err)
	}
}

// TestClientAllowList: a link-local address (refused by default) is
// reached once allow-listed — a server of the test's own on this
// machine's fe80:: address, never anyone's metadata service.
func TestClientAllowList(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	_, url := egresstest.LinkLocalServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		ok(w, r)
	}))
	start := time.Now()
	_, err := get(t, New(Config{}).Client(), url+"/", nil)
	var re *RefusedError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Addr, "fe80:") || time.Since(start) > refusalBudget {
		t.Fatalf("link-local by default: %v", err)
	}
	c := New(Config{Allow: prefixes(t, "fe80::/10")}).Client()
	defer c.CloseIdleConnections()
	if _, err := get(t, c, url+"/", nil); err != nil {
		t.Fatalf("allow-listed link-local: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the link-local server got %d requests, want 1 (the allow-listed one)", n)
	}
}

// TestRedirectToMetadataRefused: a loopback service redirecting to the
// metadata address is refused at the redirect's dial.
func TestRedirectToMetadataRefused(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	start := time.Now()
	_, err := get(t, c, srv.URL+"/start", nil)
	wantRefused(t, err, "169.254.169.254", time.Since(start))
}

// definitionHeaders are what a service_call's definition and the engine
// set on a request.
func definitionHeaders() http.Header {
	return http.Header{
		"Authorization":          {"Bearer sk-live-secret-token"},
		"X-Api-Secret":           {"custom-secret-value"},
		"Cookie":                 {"session=abc"},
		"Idempotency-Key":        {"run/scope/step"},
		"Starflow-Fencing-Token": {"run/3"},
		"User-Agent":             {"starflow"},
		"Accept":                 {"application/json"},
	}
}

func TestCrossOriginRedirectDropsHeaders(t *testing.T) {
	t.Parallel()
	other := newCountingServer(t, ok)
	// The other origin is the same address on another port, and the
	// same port under another name.
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	for _, target := range []string{other.URL + "/landing?from=first", "http://localhost:" + port + "/landing"} {
		first := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusFound)
		})
		if _, err := get(t, c, first.URL+"/start?token=query-secret", definitionHeaders()); err != nil {
			t.Fatal(err)
		}
	}
	reqs := other.requests()
	if len(reqs) != 2 {
		t.Fatalf("the other origin got %d requests, want 2", len(reqs))
	}
	for _, h := range reqs {
		for _, k := range []string{"Authorization", "X-Api-Secret", "Cookie", "Idempotency-Key", "Starflow-Fencing-Token", "Referer"} {
			if v := h.Get(k); v != "" {
				t.Errorf("the other origin got %s: %q", k, v)
			}
		}
		if h.Get("User-Agent") != "starflow" || h.Get("Accept") != "application/json" {
			t.Errorf("the other origin lost User-Agent or Accept: %v", h)
		}
	}
}

func TestSameOriginRedirectKeepsHeadersButNoReferer(t *testing.T) {
	t.Parallel()
	var srv *countingServer
	srv = newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/landing", http.StatusFound)
			return
		}
		ok(w, r)
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	if _, err := get(t, c, srv.URL+"/start?token=query-secret", definitionHeaders()); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	landing := reqs[1]
	if landing.Get("X-Api-Secret") != "custom-secret-value" || landing.Get("Idempotency-Key") != "run/scope/step" {
		t.Errorf("a same-origin redirect lost the definition's headers: %v", landing)
	}
	if v := landing.Get("Referer"); v != "" {
		t.Errorf("Referer sent: %q", v)
	}
}

// TestRedirectBackToFirstOrigin: headers dropped at another origin come
// back at the first one (they only ever go where the definition sent them).
func TestRedirectBackToFirstOrigin(t *testing.T) {
	t.Parallel()
	var first *countingServer
	other := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, first.URL+"/final", http.StatusFound)
	})
	first = newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, other.URL+"/bounce", http.StatusFound)
			return
		}
		ok(w, r)
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	if _, err := get(t, c, first.URL+"/start", definitionHeaders()); err != nil {
		t.Fatal(err)
	}
	if h := other.requests()[0]; h.Get("X-Api-Secret") != "" || h.Get("Authorization") != "" {
		t.Errorf("the other origin got the definition's headers: %v", h)
	}
	final := first.requests()[1]
	if final.Get("X-Api-Secret") != "custom-secret-value" || final.Get("Referer") != "" {
		t.Errorf("back at the first origin: %v", final)
	}
}

// TestRedirectBackAfterAnotherHostKeepsNoCredentials: after a hop to
// another host name (not the same host on another port), a redirect back
// to the first origin carries the definition's other headers again but
// not Authorization or Cookie: net/http drops those for the rest of the
// chain once a redirect leaves the first host (and its subdomains).
// docs/security.md ("Egress policy") says so.
func TestRedirectBackAfterAnotherHostKeepsNoCredentials(t *testing.T) {
	t.Parallel()
	var first *countingServer
	other := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, first.URL+"/final", http.StatusFound)
	})
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	first = newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" { // 127.0.0.1 → localhost: another host name
			http.Redirect(w, r, "http://localhost:"+otherPort+"/bounce", http.StatusFound)
			return
		}
		ok(w, r)
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	if _, err := get(t, c, first.URL+"/start", definitionHeaders()); err != nil {
		t.Fatal(err)
	}
	reqs := first.requests()
	if len(reqs) != 2 || len(other.requests()) != 1 {
		t.Fatalf("%d requests at the first origin, %d at the other; want 2 and 1", len(reqs), len(other.requests()))
	}
	final := reqs[1]
	if final.Get("X-Api-Secret") != "custom-secret-value" || final.Get("Idempotency-Key") != "run/scope/step" {
		t.Errorf("back at the first origin, the definition's other headers are missing: %v", final)
	}
	if final.Get("Authorization") != "" || final.Get("Cookie") != "" {
		t.Errorf("back at the first origin after another host, credentials came back: %v", final)
	}
}

func TestRedirectLimit(t *testing.T) {
	t.Parallel()
	// /r/N redirects to /r/N+1 until N reaches stop (then answers 200).
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/") // "", "r", stop, N
		stop, _ := strconv.Atoi(parts[2])
		n, _ := strconv.Atoi(parts[3])
		if n < stop {
			http.Redirect(w, r, fmt.Sprintf("/r/%d/%d", stop, n+1), http.StatusFound)
			return
		}
		ok(w, r)
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	resp, err := get(t, c, srv.URL+"/r/5/0", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("5 redirects: %v", err)
	}
	before := len(srv.requests())
	_, err = get(t, c, srv.URL+"/r/6/0", nil)
	var re *RedirectError
	if !errors.As(err, &re) || re.Error() != "stopped after 5 redirects" {
		t.Fatalf("6 redirects: %v", err)
	}
	if n := len(srv.requests()) - before; n != 6 {
		t.Fatalf("6 redirects: %d requests sent, want 6 (the first and 5 redirects)", n)
	}
}

func TestCrossOriginRedirectWithBodyRefused(t *testing.T) {
	t.Parallel()
	other := newCountingServer(t, ok)
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cross":
			http.Redirect(w, r, other.URL+"/landing", http.StatusTemporaryRedirect)
		case "/same":
			http.Redirect(w, r, "/landing", http.StatusPermanentRedirect)
		default:
			ok(w, r)
		}
	})
	c := New(Config{}).Client()
	defer c.CloseIdleConnections()
	post := func(path string) error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"token":"wake-token-secret"}`))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	err := post("/cross")
	var re *RedirectError
	if !errors.As(err, &re) || !strings.Contains(re.Error(), "would re-send the request body") {
		t.Fatalf("a 307 to another origin: %v", err)
	}
	if n := len(other.requests()); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
	if err := post("/same"); err != nil {
		t.Fatalf("a 308 to the same origin: %v", err)
	}
	srv.mu.Lock()
	got := srv.bodies[len(srv.bodies)-1]
	srv.mu.Unlock()
	if got != `{"token":"wake-token-secret"}` {
		t.Fatalf("the same origin got body %q after a 308", got)
	}
}

func TestOrigin(t *testing.T) {
	t.Parallel()
	req := func(s string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	same := [][2]string{
		{"http://a.test/x", "http://A.TEST:80/y?q"},
		{"https://a.test/", "https://a.test:443/"},
		{"http://[::1]:8080/", "http://[::1]:8080/z"},
	}
	differ := [][2]string{
		{"http://a.test/", "https://a.test/"},
		{"http://a.test/", "http://a.test:8080/"},
		{"http://a.test/", "http://b.a.test/"},
		{"http://127.0.0.1:8080/", "http://localhost:8080/"},
	}
	for _, p := range same {
		if Origin(req(p[0]).URL) != Origin(req(p[1]).URL) {
			t.Errorf("%s and %s differ", p[0], p[1])
		}
	}
	for _, p := range differ {
		if Origin(req(p[0]).URL) == Origin(req(p[1]).URL) {
			t.Errorf("%s and %s are the same origin", p[0], p[1])
		}
	}
}
