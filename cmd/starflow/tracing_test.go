package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestCLITraceOTLP: `starflow run` with OTEL_EXPORTER_OTLP_ENDPOINT sends
// its spans (http/protobuf) to the collector before it exits, under
// service.name OTEL_SERVICE_NAME; `runs show` prints the run's trace id,
// the spans'.
func TestCLITraceOTLP(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		names  = map[string]string{} // span name → trace id
		svc    []string
		reqErr error
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			reqErr = &unexpected{r.URL.Path + " " + r.Header.Get("Content-Type")}
		} else if err := proto.Unmarshal(b, &req); err != nil {
			reqErr = err
		}
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					svc = append(svc, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name] = hex.EncodeToString(s.TraceId)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_SERVICE_NAME=starflow-test", "OTEL_TRACES_EXPORTER="}
	res := starflowCmd(t, dir, env, "run", "three.yaml", "--input", `{"n": 21}`, "--db", "runs.db")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	id := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(res.stdout)
	if id == nil {
		t.Fatalf("no run id in output:\n%s", res.stdout)
	}
	show := starflowCmd(t, dir, nil, "runs", "show", id[1], "--db", "runs.db")
	m := regexp.MustCompile(`trace_id:\s+([0-9a-f]{32})`).FindStringSubmatch(show.stdout)
	if m == nil {
		t.Fatalf("runs show prints no trace_id:\n%s", show.stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	if reqErr != nil {
		t.Fatalf("collector: %v", reqErr)
	}
	for _, name := range []string{"enqueue three", "run three", "context_set a", "context_set b", "context_set c"} {
		if got, ok := names[name]; !ok || got != m[1] {
			t.Errorf("span %q: trace %q (exported: %v), want the run's %s", name, got, ok, m[1])
		}
	}
	if len(svc) == 0 || svc[0] != "starflow-test" {
		t.Errorf("service.name %v, want starflow-test", svc)
	}
}

type unexpected struct{ what string }

func (u *unexpected) Error() string { return "unexpected request " + u.what }

// TestCLITraceConsoleAndOff: OTEL_TRACES_EXPORTER=console writes the spans
// to stderr (service.name starflow by default); without OTEL_* variables
// (or with OTEL_SDK_DISABLED=true) nothing is traced and no trace id is
// stored; an exporter it does not know is an error naming the variable.
func TestCLITraceConsoleAndOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	res := starflowCmd(t, dir, []string{"OTEL_TRACES_EXPORTER=console"}, "run", "three.yaml", "--db", "console.db")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{`"Name":"run three"`, `"Name":"context_set c"`, `{"Key":"service.name","Value":{"Type":"STRING","Value":"starflow"}}`} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %s:\n%.2000s", want, res.stderr)
		}
	}
	if strings.Contains(res.stdout, `"SpanContext"`) {
		t.Errorf("spans on stdout:\n%s", res.stdout)
	}
	for _, env := range [][]string{{"OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_ENDPOINT="},
		{"OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=console"}, {"OTEL_TRACES_EXPORTER=none"}} {
		off := starflowCmd(t, dir, env, "run", "three.yaml", "--db", "off.db", "--input", `{"n": 1}`)
		if off.code != 0 || strings.Contains(off.stderr, "SpanContext") {
			t.Fatalf("%v: exit %d, stderr:\n%s", env, off.code, off.stderr)
		}
		id := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(off.stdout)
		if id == nil {
			t.Fatalf("no run id in output:\n%s", off.stdout)
		}
		if show := starflowCmd(t, dir, nil, "runs", "show", id[1], "--db", "off.db"); strings.Contains(show.stdout, "trace_id") {
			t.Errorf("%v: tracing off stored a trace:\n%s", env, show.stdout)
		}
	}
	bad := starflowCmd(t, dir, []string{"OTEL_TRACES_EXPORTER=zipkin"}, "run", "three.yaml", "--db", "bad.db")
	if bad.code == 0 || !strings.Contains(bad.stderr, `OTEL_TRACES_EXPORTER "zipkin": want otlp, console or none`) {
		t.Errorf("an unknown exporter: exit %d, stderr:\n%s", bad.code, bad.stderr)
	}
}
