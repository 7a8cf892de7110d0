package httpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveTest binds 127.0.0.1:0 with cfg, serves h and shuts down at the end
// of t.
func serveTest(t *testing.T, cfg ServerConfig, h http.Handler) *Server {
	t.Helper()
	s, err := Bind("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// closedWithin waits until the server closes conn (a read returns EOF or
// a reset) and returns how long that took; it fails t past limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", limit)
	}
	return time.Since(start)
}

// TestSlowHeadersDisconnected: a client that sends its headers a byte at
// a time (slowloris) is disconnected when ReadHeaderTimeout runs out,
// however steadily it sends.
func TestSlowHeadersDisconnected(t *testing.T) {
	t.Parallel()
	s := serveTest(t, ServerConfig{ReadHeaderTimeout: 300 * time.Millisecond}, okHandler)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		req := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 1000)
		for i := range len(req) {
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the slow client's pace, not a wait for an outcome
		}
	}()
	start := time.Now()
	<-closed // the writes fail once the server has closed the connection
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a slowloris client kept its connection for %s (ReadHeaderTimeout 300ms)", d)
	}
	closedWithin(t, conn, 5*time.Second)
}

// TestSlowBodyDisconnected: a client that sends its headers at once and
// then trickles the body is disconnected when ReadTimeout runs out.
func TestSlowBodyDisconnected(t *testing.T) {
	t.Parallel()
	s := serveTest(t, ServerConfig{ReadTimeout: 400 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	}))
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	if d := closedWithin(t, conn, 5*time.Second); d > 4*time.Second {
		t.Fatalf("a slow body kept its connection for %s (ReadTimeout 400ms)", d)
	}
}

// TestIdleConnectionClosed: a kept-alive connection with no next request
// is closed after IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	s := serveTest(t, ServerConfig{IdleTimeout: 300 * time.Millisecond}, okHandler)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first request: %v %v", res, err)
	}
	res.Body.Close()
	if d := closedWithin(t, conn, 5*time.Second); d > 4*time.Second {
		t.Fatalf("an idle connection stayed open %s (IdleTimeout 300ms)", d)
	}
}

// TestSlowHandlerWriteTimeout: a response not written within WriteTimeout
// is cut off.
func TestSlowHandlerWriteTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := serveTest(t, ServerConfig{WriteTimeout: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(600 * time.Millisecond):
		}
		io.WriteString(w, strings.Repeat("x", 1<<20))
	}))
	defer close(release)
	res, err := http.Get("http://" + s.Addr() + "/slow")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	if err == nil {
		t.Fatal("a response written after WriteTimeout arrived whole")
	}
}

// TestHeaderLimit: a header block over MaxHeaderBytes is refused 431.
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	s := serveTest(t, ServerConfig{}, okHandler)
	req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/x", nil)
	req.Header.Set("X-Big", strings.Repeat("a", MaxHeaderBytesDefault+8<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a %d-byte header: %d, want 431", MaxHeaderBytesDefault+8<<10, res.StatusCode)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	if res, err = http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("an 8 KiB header: %v %v", res, err)
	}
	res.Body.Close()
}

// TestServerDefaults: the listener's http.Server carries the documented
// defaults.
func TestServerDefaults(t *testing.T) {
	t.Parallel()
	s, err := Bind("127.0.0.1:0", ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if s.srv.ReadHeaderTimeout != 5*time.Second || s.srv.ReadTimeout != 30*time.Second || s.srv.WriteTimeout != 30*time.Second ||
		s.srv.IdleTimeout != 120*time.Second || s.srv.MaxHeaderBytes != 64<<10 {
		t.Fatalf("defaults: %+v", s.srv)
	}
}

// TestHostCheck: a loopback listener answers requests whose Host is one
// of its names (any port) and refuses others with a 403 problem document
// (DNS rebinding); a request without Host (HTTP/1.0) passes.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	s := serveTest(t, ServerConfig{AllowedHosts: []string{"Starflow.Example.com", "proxy.internal:8443"}}, okHandler)
	_, port, _ := net.SplitHostPort(s.Addr())
	for _, tc := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST:" + port, 200},
		{"[::1]:" + port, 200},
		{"localhost:9000", 200}, // a port forward (ssh -L) changes the port
		{"127.0.0.1", 200},
		{"starflow.example.com", 200},
		{"starflow.example.com:443", 200},
		{"proxy.internal", 200},
		{"evil.example", 403},
		{"evil.example:" + port, 403},
		{"localhost.evil.example:" + port, 403},
		{"127.0.0.1.nip.io:" + port, 403},
		{"10.0.0.1:" + port, 403},
		{"[::2]:" + port, 403},
	} {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: "+tc.host+"\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("Host %s: %v", tc.host, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		conn.Close()
		if res.StatusCode != tc.code {
			t.Errorf("Host %s: %d %s, want %d", tc.host, res.StatusCode, body, tc.code)
			continue
		}
		if tc.code == 403 {
			var p map[string]any
			if err := json.Unmarshal(body, &p); err != nil || p["title"] != "host not allowed" || p["status"] != 403.0 ||
				res.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("Host %s: not a problem document: %s", tc.host, body)
			}
		}
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /x HTTP/1.0\r\n\r\n")
	if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("HTTP/1.0 without Host: %v %v", res, err)
	}
}

func TestAllowedHostsValidated(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "http://x.example", "a b", "user@x.example", "x.example/path"} {
		if s, err := Bind("127.0.0.1:0", ServerConfig{AllowedHosts: []string{h}}); err == nil {
			s.Shutdown(context.Background())
			t.Errorf("allowed host %q accepted", h)
		}
	}
}
