package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/step"
)

const secret = "sk-live-0123456789abcdef0123456789abcdef"

func fragmentsOf(s, secret string) []string {
	var out []string
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+8]) {
			out = append(out, secret[i:i+8])
		}
	}
	return out
}

// TestStatusErrorBodyScrubbedBeforeCut: the secret straddles the
// SnippetBytes cut, plain and JSON-escaped; the snippet keeps no part of
// it.
func TestStatusErrorBodyScrubbedBeforeCut(t *testing.T) {
	t.Parallel()
	escaped := `\u0073k-live-0123456789abcdef0123456789abcde\u0066`
	for name, body := range map[string]string{
		"plain":   strings.Repeat("x", SnippetBytes-10) + secret + strings.Repeat("y", 500),
		"escaped": strings.Repeat("x", SnippetBytes-20) + escaped + strings.Repeat("y", 500),
		"many":    strings.Repeat(secret+" ", 100),
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			c := egress.New(egress.Config{}).Client()
			defer c.CloseIdleConnections()
			_, err := Call(context.Background(), c, &HTTPRequest{URL: srv.URL, Redactor: redact.New(secret)})
			var se *StatusError
			if !errors.As(err, &se) || !step.IsPermanent(err) {
				t.Fatalf("got %v, want a permanent *StatusError", err)
			}
			if f := fragmentsOf(se.Body, secret); len(f) > 0 {
				t.Fatalf("snippet %q keeps fragments %v", se.Body, f)
			}
			if !strings.Contains(se.Body, redact.Mask) || !strings.HasSuffix(se.Body, "…") || len(se.Body) > SnippetBytes+len("…") {
				t.Fatalf("snippet %q (%d bytes)", se.Body, len(se.Body))
			}
		})
	}
}

func TestSnippetCutsAtCharacterBoundary(t *testing.T) {
	t.Parallel()
	s := snippet(nil, []byte(strings.Repeat("é", SnippetBytes))) // 2 bytes each
	if !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || len(s) > SnippetBytes+len("…") {
		t.Fatalf("%q", s)
	}
}

func TestCallEgressRefusalIsPermanent(t *testing.T) {
	t.Parallel()
	c := egress.New(egress.Config{}).Client()
	start := time.Now()
	_, err := Call(context.Background(), c, &HTTPRequest{URL: "http://169.254.169.254/latest/meta-data/"})
	var re *egress.RefusedError
	if !errors.As(err, &re) || !step.IsPermanent(err) || err.Error() != "egress to 169.254.169.254 refused by policy" {
		t.Fatalf("got %v (permanent %v)", err, step.IsPermanent(err))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("refusal took %s", d)
	}
}

func TestCallRedirectLimitIsPermanent(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("/loop/%d", n.Add(1)), http.StatusFound)
	}))
	defer srv.Close()
	c := egress.New(egress.Config{}).Client()
	defer c.CloseIdleConnections()
	_, err := Call(context.Background(), c, &HTTPRequest{URL: srv.URL + "/?key=query-secret"})
	var re *egress.RedirectError
	if !errors.As(err, &re) || !step.IsPermanent(err) {
		t.Fatalf("got %v", err)
	}
	if want := "GET " + srv.URL + "/: stopped after 5 redirects"; err.Error() != want {
		t.Fatalf("error %q, want %q (no query string)", err, want)
	}
}

func TestCallDeniedLoopbackNotReached(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c := egress.New(egress.Config{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}).Client()
	_, err := Call(context.Background(), c, &HTTPRequest{URL: srv.URL})
	if err == nil || err.Error() != "egress to 127.0.0.1 refused by policy" || !step.IsPermanent(err) {
		t.Fatalf("got %v", err)
	}
	srv.Close()
	if n := hits.Load(); n != 0 {
		t.Fatalf("the denied server got %d requests", n)
	}
}

// TestCallRefusesNonFiniteResponse: a JSON response with a number that
// has no finite value (1e400) fails the call, non-retryable, naming the
// number and where it is — never an output holding ±Inf. The same bytes
// under a non-JSON Content-Type stay text (issue 10 item 4).
func TestCallRefusesNonFiniteResponse(t *testing.T) {
	t.Parallel()
	ctypes := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", <-ctypes)
		w.Write([]byte(`{"order": {"total": -1e400}}`))
	}))
	defer srv.Close()
	for _, ct := range []string{"application/json", "application/problem+json; charset=utf-8"} {
		ctypes <- ct
		out, err := Call(context.Background(), srv.Client(), &HTTPRequest{URL: srv.URL + "/orders?token=secret"})
		if err == nil {
			t.Fatalf("%s: output %v, want an error", ct, out)
		}
		if !step.IsPermanent(err) || !errors.Is(err, jsonvalue.ErrNonFinite) {
			t.Errorf("%s: error %v is not a permanent ErrNonFinite", ct, err)
		}
		for _, frag := range []string{"-1e400", "$.order.total", "out of range", "/orders", "answered 200"} {
			if !strings.Contains(err.Error(), frag) {
				t.Errorf("%s: error %q lacks %q", ct, err, frag)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error carries the URL's query: %v", err)
		}
	}
	ctypes <- "text/plain"
	out, err := Call(context.Background(), srv.Client(), &HTTPRequest{URL: srv.URL})
	if err != nil || out["body"] != `{"order": {"total": -1e400}}` {
		t.Fatalf("text body: %v %v", out, err)
	}
}
