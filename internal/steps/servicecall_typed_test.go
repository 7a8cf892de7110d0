package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/step"
)

// typeOf is the type the engine reads off an error: the first Type()
// string method errors.As finds.
func typeOf(err error) string {
	var typed interface{ Type() string }
	if errors.As(err, &typed) {
		return typed.Type()
	}
	return ""
}

// TestCallEchoesRequestScrubbed: the output's request is what was sent —
// method, URL with its query, headers — with the run's secrets scrubbed
// wherever they are (a query value, a header value) and credential
// headers and query parameters masked by name, whatever their value; the
// service still receives everything unmasked.
func TestCallEchoesRequestScrubbed(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	defer srv.Close()
	c := egress.New(egress.Config{}).Client()
	defer c.CloseIdleConnections()
	userURL := strings.Replace(srv.URL, "http://", "http://alice:hunter2-password@", 1)
	out, err := Call(context.Background(), c, &HTTPRequest{
		Method: "post",
		URL:    userURL + "/orders?q=" + secret + "&page=2#frag",
		Query:  map[string]string{"api_key": "literal-query-key", "state": "x" + secret},
		Headers: map[string]string{
			"Authorization": "Bearer " + secret,
			"x-api-key":     "literal-api-key",
			"X-Auth-Token":  "literal-auth-token",
			"Cookie":        "sid=literal-cookie",
			"X-Trace":       "trace-" + secret,
			"X-Plain":       "hello",
		},
		Body:           map[string]any{"n": 1},
		HasBody:        true,
		IdempotencyKey: "run-1//call",
		FencingToken:   "run-1/3",
		Redactor:       redact.New(secret),
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := <-got
	if sent.Header.Get("Authorization") != "Bearer "+secret || sent.URL.Query().Get("api_key") != "literal-query-key" {
		t.Fatalf("the service got %v %v: the echo's masking reached the request", sent.URL, sent.Header)
	}
	want := map[string]any{
		"method": "POST",
		"url":    srv.URL + "/orders?api_key=***&page=2&q=***&state=x***",
		"headers": map[string]any{
			"accept":                 "application/json",
			"authorization":          redact.Mask,
			"content-type":           "application/json",
			"cookie":                 redact.Mask,
			"idempotency-key":        "run-1//call",
			"starflow-fencing-token": "run-1/3",
			"user-agent":             "starflow",
			"x-api-key":              redact.Mask,
			"x-auth-token":           redact.Mask,
			"x-plain":                "hello",
			"x-trace":                "trace-" + redact.Mask,
		},
	}
	if !reflect.DeepEqual(out["request"], want) {
		t.Fatalf("request\n got %#v\nwant %#v", out["request"], want)
	}
	if len(out) != 4 || out["status"] != int64(200) || !reflect.DeepEqual(out["body"], map[string]any{"ok": true}) {
		t.Fatalf("output %v, want {status, headers, body, request}", out)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"hunter2", "alice", "literal-", "frag"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("output holds %q: %s", leak, b)
		}
	}
	if f := fragmentsOf(string(b), secret); len(f) > 0 {
		t.Errorf("output keeps fragments %v of the secret: %s", f, b)
	}
}

// TestCallEchoKeepsRawQuery: a query written in the URL (no Query map) is
// echoed in its order and escaping; a secret percent-escaped in it is
// scrubbed all the same.
func TestCallEchoKeepsRawQuery(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	escaped := strings.Replace(secret, "k", "%6B", 1) // s%6B-live-…
	out, err := Call(context.Background(), srv.Client(), &HTTPRequest{
		URL:      srv.URL + "/?z=1&a=%20b&access_token=abc&sig=" + escaped + "&flag",
		Redactor: redact.New(secret),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out["request"].(map[string]any)["url"], srv.URL+"/?z=1&a=%20b&access_token=***&sig=***&flag"; got != want {
		t.Fatalf("url %q, want %q", got, want)
	}
}

func TestCredentialName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"Authorization":          true,
		"Proxy-Authorization":    true,
		"Cookie":                 true,
		"X-Api-Key":              true,
		"X-Upstream-TOKEN":       true,
		"X-Client-Secret":        true,
		"X-Auth":                 true,
		"api_key":                true,
		"Idempotency-Key":        false,
		"idempotency-key":        false,
		"Starflow-Fencing-Token": false,
		"Accept":                 false,
		"Content-Type":           false,
		"Keep-Alive":             false,
		"page":                   false,
	} {
		if got := credentialName(name); got != want {
			t.Errorf("credentialName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestStatusErrorPayload: an unexpected status carries the whole response
// body, scrubbed, parsed when it is JSON, cut to ErrorBodyBytes (as text)
// when longer; the snippet and the message stay as they were.
func TestStatusErrorPayload(t *testing.T) {
	t.Parallel()
	big := `{"data": "` + strings.Repeat("é", 50<<10) + `"}` // 100 KiB and more, JSON
	cases := []struct {
		name, ctype, body string
		status            int
		want              any // nil: check the cut
	}{
		{"json", "application/json", `{"error": "nope", "token": "` + secret + `", "n": 2}`, 404,
			map[string]any{"error": "nope", "token": redact.Mask, "n": int64(2)}},
		{"problem json", "application/problem+json; charset=utf-8", `{"title": "busy"}`, 503,
			map[string]any{"title": "busy"}},
		{"json escaped secret", "application/json", `["\u0073k-live-0123456789abcdef0123456789abcde\u0066"]`, 400,
			[]any{redact.Mask}},
		{"text", "text/plain", "not found: " + secret + "\n", 404, "not found: " + redact.Mask + "\n"},
		{"bad json stays text", "application/json", `{"error": `, 500, `{"error": `},
		{"json under text type", "text/plain", `{"a": 1}`, 422, `{"a": 1}`},
		{"empty", "text/plain", "", 404, nil},
		{"big json", "application/json", big, 500, nil},
		{"secret across the cut", "text/plain", strings.Repeat("x", ErrorBodyBytes-10) + secret + strings.Repeat("y", 100), 400, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := Call(context.Background(), srv.Client(), &HTTPRequest{URL: srv.URL + "/x?k=v", Redactor: redact.New(secret)})
			var se *StatusError
			if !errors.As(err, &se) || se.Status != tc.status || typeOf(err) != TypeHTTP || se.Type() != "http" {
				t.Fatalf("got %v (type %q), want a *StatusError %d of type http", err, typeOf(err), tc.status)
			}
			if step.IsPermanent(err) == se.Retryable() {
				t.Fatalf("status %d: permanent %v", tc.status, step.IsPermanent(err))
			}
			wantMsg := fmt.Sprintf("GET %s/x answered %d %s", srv.URL, tc.status, http.StatusText(tc.status))
			if se.Body != "" {
				wantMsg += ": " + se.Body
			}
			if err.Error() != wantMsg || se.Body != snippet(redact.New(secret), []byte(tc.body)) {
				t.Fatalf("message %q, want %q", err, wantMsg)
			}
			switch tc.name {
			case "big json", "secret across the cut":
				s, ok := se.Payload.(string)
				if !ok || len(s) > ErrorBodyBytes || len(s) < ErrorBodyBytes-utf8.UTFMax || !utf8.ValidString(s) {
					t.Fatalf("payload %T of %d bytes, want text of at most %d", se.Payload, len(s), ErrorBodyBytes)
				}
				if tc.name == "big json" && !strings.HasPrefix(tc.body, s) {
					t.Fatalf("payload is not the start of the body")
				}
				if f := fragmentsOf(s, secret); len(f) > 0 {
					t.Fatalf("payload keeps fragments %v", f)
				}
				if tc.name == "secret across the cut" && !strings.Contains(s[len(s)-200:], redact.Mask+"y") {
					t.Fatalf("payload ends %q, want the mask (scrubbed before the cut)", s[len(s)-200:])
				}
			default:
				if !reflect.DeepEqual(se.Payload, tc.want) {
					t.Fatalf("payload %#v, want %#v", se.Payload, tc.want)
				}
			}
		})
	}
}

// TestCallRefusedConnectionIsNetworkError: nothing listens at the
// address; the error is a retryable *NetworkError of type network with
// the message Call always gave, unwrapping to the dial error.
func TestCallRefusedConnectionIsNetworkError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := egress.New(egress.Config{}).Client()
	defer c.CloseIdleConnections()
	_, err = Call(context.Background(), c, &HTTPRequest{URL: "http://" + addr + "/x?token=query-secret"})
	var ne *NetworkError
	if !errors.As(err, &ne) || step.IsPermanent(err) || typeOf(err) != TypeNetwork || ne.Type() != "network" {
		t.Fatalf("got %v (%T, type %q), want a retryable *NetworkError", err, err, typeOf(err))
	}
	if want := fmt.Sprintf("GET http://%s/x: dial tcp %s: connect: connection refused", addr, addr); err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, syscall.ECONNREFUSED) || errors.Unwrap(err) != ne.Err {
		t.Fatalf("%v does not unwrap to the dial error", err)
	}
}

// TestCallCutResponseIsNetworkError: the service promises more body than
// it sends and hangs up; reading the response fails, a *NetworkError.
func TestCallCutResponseIsNetworkError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		_ = buf.Flush()
	}))
	defer srv.Close()
	_, err := Call(context.Background(), srv.Client(), &HTTPRequest{URL: srv.URL + "/x"})
	var ne *NetworkError
	if !errors.As(err, &ne) || step.IsPermanent(err) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v (%T), want a retryable *NetworkError wrapping io.ErrUnexpectedEOF", err, err)
	}
	if want := "GET " + srv.URL + "/x: reading response: unexpected EOF"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

// TestCallContextEndIsNotNetworkError: when the request's context ends —
// its deadline, or a timeout with a cause, as a step's timeout is — the
// error is the context's, never a *NetworkError, also while the body is
// being read.
func TestCallContextEndIsNotNetworkError(t *testing.T) {
	t.Parallel()
	cause := errors.New("step call timed out after 50ms")
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		midBody bool
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded, false},
		{"cause", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(context.Background(), 50*time.Millisecond, cause)
		}, cause, false},
		{"deadline mid-body", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.midBody {
					w.Header().Set("Content-Length", "100")
					_, _ = io.WriteString(w, "start")
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done() // the client hung up
			}))
			defer srv.Close()
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := Call(ctx, srv.Client(), &HTTPRequest{URL: srv.URL})
			var ne *NetworkError
			if err == nil || errors.As(err, &ne) || !errors.Is(err, tc.want) || step.IsPermanent(err) || typeOf(err) != "" {
				t.Fatalf("got %v (%T), want the context's error %v and no *NetworkError", err, err, tc.want)
			}
		})
	}
}

// TestCallRedirectRefusalIsTyped: a redirect the client would not follow
// is a permanent *RedirectRefusedError of type egress_refused, unwrapping
// to the *egress.RedirectError, with the message Call always gave.
func TestCallRedirectRefusalIsTyped(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c := &http.Client{Transport: srv.Client().Transport, CheckRedirect: egress.CheckRedirect}
	_, err := Call(context.Background(), c, &HTTPRequest{URL: srv.URL + "/start?key=v", Body: map[string]any{"a": 1}, HasBody: true})
	var rr *RedirectRefusedError
	var re *egress.RedirectError
	if !errors.As(err, &rr) || !errors.As(err, &re) || rr.Err != re || !step.IsPermanent(err) || typeOf(err) != egress.TypeRefused {
		t.Fatalf("got %v (%T, type %q)", err, err, typeOf(err))
	}
	if want := "POST " + srv.URL + "/start: " + re.Reason; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}
