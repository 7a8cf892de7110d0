package steps

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/step"
)

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
