package httpserver

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/starflowtype"
)

// TestGetRevision: GET /api/workflows/{name}/revisions/{revision} reads
// any stored revision (not only the current one) with its spec and
// source; an unknown revision, another workspace's or a malformed one
// is 404 or 422; the Go client reads the same.
func TestGetRevision(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	admin, viewer := e.keys["alpha/admin"], e.keys["alpha/viewer"]
	first := e.revision("alpha", "quick")
	second := strings.Replace(quickWF, "context_set: {x:", "context_set: {y: 1, x:", 1)
	if a := e.call("PUT", "/api/workflows/quick", admin, second); a.status != 200 {
		t.Fatalf("apply a second revision: %d %s", a.status, shortBody(a.body))
	}
	if cur := e.revision("alpha", "quick"); cur == first {
		t.Fatal("the second revision did not change the current one")
	}
	for _, rev := range []string{first, strings.ToUpper(first)} {
		a := e.call("GET", "/api/workflows/quick/revisions/"+rev, viewer, nil)
		var d starflowtype.Definition
		if a.status != 200 {
			t.Fatalf("GET revision %s: %d %s", rev, a.status, shortBody(a.body))
		}
		a.decode(t, &d)
		if d.Revision != first || d.Source != quickWF || len(d.Spec) == 0 {
			t.Errorf("revision %s: got revision %s, source %q, spec %d bytes; want the first revision with its source and spec", rev, d.Revision, d.Source, len(d.Spec))
		}
	}
	missing := strings.Repeat("ab", 32)
	for path, want := range map[string]int{
		"/api/workflows/quick/revisions/" + missing:                             http.StatusNotFound,
		"/api/workflows/nope/revisions/" + first:                                http.StatusNotFound,
		"/api/workflows/quick/revisions/" + first[:63]:                          http.StatusUnprocessableEntity,
		"/api/workflows/quick/revisions/" + first[:63] + "g":                    http.StatusUnprocessableEntity,
		"/api/workflows/only-beta/revisions/" + e.revision("beta", "only-beta"): http.StatusNotFound,
	} {
		if a := e.call("GET", path, viewer, nil); a.status != want {
			t.Errorf("GET %s: %d %s, want %d", path, a.status, shortBody(a.body), want)
		}
	}
	c := client.New(e.url, viewer)
	d, err := c.Revision(t.Context(), "quick", first)
	if err != nil || d.Revision != first || d.Source != quickWF {
		t.Errorf("client.Revision: %v, %+v", err, d)
	}
	if _, err := c.Revision(t.Context(), "quick", missing); !isStatus(err, http.StatusNotFound) {
		t.Errorf("client.Revision of a missing revision: %v, want a 404 problem", err)
	}
}

// isStatus reports whether err is a problem of the client with status.
func isStatus(err error, status int) bool {
	var p *api.Problem
	return errors.As(err, &p) && p.Status == status
}
