package httpserver

import (
	"net/http"
	"strings"
	"testing"
)

// TestRunErrorIsTheTypedObject (issue 14): GET /api/runs/{id}, the run
// listings and the ledger give a failed run's error as the typed object;
// the published schema says so.
func TestRunErrorIsTheTypedObject(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	run := e.deadLetter("alpha")
	key := e.keys["alpha/viewer"]
	check := func(where string, v map[string]any) {
		t.Helper()
		obj, ok := v["error"].(map[string]any)
		if !ok {
			t.Fatalf("%s: error is %T %v, want an object", where, v["error"], v["error"])
		}
		if obj["type"] != "error" || obj["step_id"] != "b" || obj["scope_path"] != "" ||
			!strings.Contains(obj["message"].(string), "exploded on purpose") {
			t.Fatalf("%s: error %v", where, obj)
		}
		if _, ok := v["error_detail"]; ok {
			t.Fatalf("%s: the raw error_detail is shown beside error: %v", where, v)
		}
	}
	var detail map[string]any
	a := e.call(http.MethodGet, "/api/runs/"+run.ID, key, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET run: %d %s", a.status, a.body)
	}
	a.decode(t, &detail)
	check("GET /api/runs/{id}", detail)

	var list struct{ Runs []map[string]any }
	e.call(http.MethodGet, "/api/dead-letters", key, nil).decode(t, &list)
	if len(list.Runs) == 0 {
		t.Fatal("no dead letter listed")
	}
	check("GET /api/dead-letters", list.Runs[0])

	var ledger struct{ Run map[string]any }
	e.call(http.MethodGet, "/api/runs/"+run.ID+"/ledger", key, nil).decode(t, &ledger)
	check("GET /api/runs/{id}/ledger", ledger.Run)

	ok := e.ended("alpha")
	var good map[string]any
	e.call(http.MethodGet, "/api/runs/"+ok.ID, key, nil).decode(t, &good)
	if _, has := good["error"]; has {
		t.Fatalf("a succeeded run has an error: %v", good["error"])
	}

	var doc map[string]any
	e.call(http.MethodGet, "/openapi.json", "", nil).decode(t, &doc)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	rv, _ := schemas["RunView"].(map[string]any)
	props, _ := rv["properties"].(map[string]any)
	errProp, _ := props["error"].(map[string]any)
	if errProp == nil || errProp["type"] == "string" {
		t.Fatalf("the OpenAPI RunView error is %v, want the ErrorInfo object", errProp)
	}
}
