package httpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestEnqueueTraceparent: with tracing on, POST /run/{workflow}/enqueue
// takes the request's traceparent as the parent of the run's enqueue
// span; the run's trace_id is the caller's, in the enqueue's answer and
// the run detail, and the OpenAPI document describes both. Without the
// header the run gets a trace of its own.
func TestEnqueueTraceparent(t *testing.T) {
	t.Parallel()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "api.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(context.Background(), "wf.yaml", []byte(quickWF)); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Backend: eng, API: &APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &apiEnv{t: t, url: srv.URL, eng: eng, store: store, keys: map[string]string{}}

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	a := e.call("POST", "/run/quick/enqueue", "", map[string]any{"input": map[string]any{"n": 1}}, "traceparent", parent)
	if a.status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", a.status, shortBody(a.body))
	}
	var r starflowtype.Run
	a.decode(t, &r)
	if r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("enqueue answer trace_id %q, want the traceparent's", r.TraceID)
	}
	var detail starflowtype.Run
	e.call("GET", "/api/runs/"+r.ID, "", nil).decode(t, &detail)
	if detail.TraceID != r.TraceID {
		t.Errorf("run detail trace_id %q, want %q", detail.TraceID, r.TraceID)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans %v, want one enqueue span under the caller's", spans)
	}

	var own starflowtype.Run
	e.call("POST", "/run/quick/enqueue", "", map[string]any{"input": map[string]any{"n": 2}}).decode(t, &own)
	if len(own.TraceID) != 32 || own.TraceID == r.TraceID {
		t.Errorf("a run enqueued without traceparent: trace_id %q, want a new trace", own.TraceID)
	}

	doc := string(e.call("GET", "/openapi.json", "", nil).body)
	for _, want := range []string{`"trace_id"`, `"name":"traceparent"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the OpenAPI document lacks %s", want)
		}
	}
}
