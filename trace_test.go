package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// traceService is an HTTP service that records the traceparent header of
// every request, by the request body's item.
type traceService struct {
	*httptest.Server
	mu     sync.Mutex
	parent map[string]string // item → traceparent ("" when none came)
}

func newTraceService(t *testing.T) *traceService {
	t.Helper()
	s := &traceService{parent: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Item any `json:"item"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.parent[fmt.Sprint(body.Item)] = r.Header.Get("traceparent")
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *traceService) traceparent(item string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.parent[item]
	return v, ok
}

// spanTree indexes the ended spans of a recorder.
type spanTree struct {
	t     *testing.T
	spans []sdktrace.ReadOnlySpan
}

func (st spanTree) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range st.spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one is the only span named name (with attribute kv when given).
func (st spanTree) one(name string, kv ...attribute.KeyValue) sdktrace.ReadOnlySpan {
	st.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range st.named(name) {
		if len(kv) == 0 || hasAttr(s, kv[0]) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		st.t.Fatalf("%d spans named %q %v, want 1; spans: %s", len(found), name, kv, st)
	}
	return found[0]
}

func (st spanTree) String() string {
	var b strings.Builder
	for _, s := range st.spans {
		fmt.Fprintf(&b, "\n  %s (%s, parent %s)", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID())
	}
	return b.String()
}

func hasAttr(s sdktrace.ReadOnlySpan, kv attribute.KeyValue) bool {
	for _, a := range s.Attributes() {
		if a == kv {
			return true
		}
	}
	return false
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// wantChild fails unless child's parent is parent (same trace).
func wantChild(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %q: parent %s in trace %s, want %q (%s) in trace %s", child.Name(), child.Parent().SpanID(),
			child.SpanContext().TraceID(), parent.Name(), parent.SpanContext().SpanID(), parent.SpanContext().TraceID())
	}
}

const tracedChildDef = `name: traced_child
steps:
  - id: twice
    context_set: {d: "${{ input.n * 2 }}"}
output: "${{ variables.d }}"
`

const tracedDef = `name: traced
steps:
  - id: flaky
    flaky: {}
    retry_policy: {max_attempts: 3, initial_interval: 10ms}
  - id: ship
    for_each:
      items: "${{ ['a', 'b'] }}"
      steps:
        - id: call
          service_call: {url: "${{ input.url }}", method: POST, body: {item: "${{ item }}"}}
  - id: sub
    workflow_call: {workflow: traced_child, input: {n: 2}}
`

// TestTraceSpanTree: a run with a retried step, a for_each of service
// calls and a workflow_call is one trace, the caller's: the enqueue span
// under the caller's span, each execution under the enqueue span, the
// steps under their execution, the items under the for_each, the retry an
// event, the service's traceparent the call's span, and the child run's
// spans under the parent's workflow_call span. The run row's trace id is
// the spans'.
func TestTraceSpanTree(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	svc := newTraceService(t)
	h := newHarness(t, starflow.Config{TracerProvider: tp})
	var tries atomic.Int32
	if err := h.eng.RegisterStep("flaky", func(context.Context, *step.Request) (any, error) {
		if tries.Add(1) == 1 {
			return nil, errors.New("flaky: first try fails")
		}
		return map[string]any{"ok": true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.apply(tracedChildDef)
	h.apply(tracedDef)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cctx, caller := tp.Tracer("test").Start(ctx, "caller")
	run, err := h.eng.Enqueue(cctx, "traced", map[string]any{"url": svc.URL}, nil)
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	end, err := h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	traceID := caller.SpanContext().TraceID()
	if end.TraceID != traceID.String() || run.TraceID != end.TraceID {
		t.Fatalf("run trace_id %q (at enqueue %q), want the caller's %s", end.TraceID, run.TraceID, traceID)
	}
	child, err := h.store.GetRun(ctx, &state.GetRunParams{ID: attrOfChild(t, rec)})
	if err != nil {
		t.Fatal(err)
	}
	if child.TraceID != end.TraceID {
		t.Errorf("child run trace_id %q, want the parent's %s", child.TraceID, end.TraceID)
	}

	st := spanTree{t: t, spans: rec.Ended()}
	for _, s := range st.spans {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	callerSpan := st.one("caller")
	enqueue := st.one("enqueue traced")
	wantChild(t, enqueue, callerSpan)
	if end.TraceParent != fmt.Sprintf("00-%s-%s-01", traceID, enqueue.SpanContext().SpanID()) {
		t.Errorf("trace_parent %q, want the enqueue span %s", end.TraceParent, enqueue.SpanContext().SpanID())
	}
	if enqueue.SpanKind() != trace.SpanKindProducer {
		t.Errorf("enqueue span kind %s, want producer", enqueue.SpanKind())
	}
	// Two executions: until the workflow_call parks, then after the
	// child's end woke the parent.
	execs := st.named("run traced")
	if len(execs) != 2 {
		t.Fatalf("%d executions of the run, want 2 (parked at the workflow_call, resumed): %s", len(execs), st)
	}
	outcomes := map[string]bool{}
	for _, x := range execs {
		wantChild(t, x, enqueue)
		outcomes[attr(x, "starflow.outcome").AsString()] = true
		if got := attr(x, "starflow.run_id").AsString(); got != run.ID {
			t.Errorf("execution span run_id %q, want %s", got, run.ID)
		}
	}
	if !outcomes["paused"] || !outcomes["succeeded"] {
		t.Errorf("execution outcomes %v, want paused and succeeded", outcomes)
	}

	flaky := st.one("flaky flaky")
	wantChild(t, flaky, st.one("run traced", attribute.String("starflow.outcome", "paused")))
	if got := attr(flaky, "starflow.tries").AsInt64(); got != 2 {
		t.Errorf("flaky tries %d, want 2", got)
	}
	if ev := flaky.Events(); len(ev) != 1 || ev[0].Name != "retry" {
		t.Errorf("flaky events %+v, want one retry", ev)
	} else if set := attribute.NewSet(ev[0].Attributes...); !set.HasValue("starflow.try") ||
		!strings.Contains(fmt.Sprint(ev[0].Attributes), "first try fails") {
		t.Errorf("retry event attributes %v, want the try and the error", ev[0].Attributes)
	}
	for _, kv := range []attribute.KeyValue{attribute.String("starflow.workflow", "traced"), attribute.String("starflow.step_kind", "flaky"),
		attribute.String("starflow.scope_path", ""), attribute.Int("starflow.attempt", 1), attribute.String("starflow.step_status", "succeeded"),
		attribute.String("starflow.revision", end.WorkflowRevision)} {
		if !hasAttr(flaky, kv) {
			t.Errorf("flaky span lacks %v: %v", kv, flaky.Attributes())
		}
	}

	ship := st.one("for_each ship")
	for _, item := range []string{"a", "b"} {
		i := map[string]string{"a": "0", "b": "1"}[item]
		it := st.one("item ship", attribute.String("starflow.scope_path", "ship.item_"+i))
		wantChild(t, it, ship)
		call := st.one("service_call call", attribute.String("starflow.scope_path", "ship.item_"+i))
		wantChild(t, call, it)
		got, ok := svc.traceparent(item)
		want := fmt.Sprintf("00-%s-%s-01", traceID, call.SpanContext().SpanID())
		if !ok || got != want {
			t.Errorf("item %s: the service received traceparent %q, want the call span's %q", item, got, want)
		}
	}

	// The workflow_call: entered in the first execution (the child is
	// enqueued under it), finished in the second.
	subs := st.named("workflow_call sub")
	if len(subs) != 2 {
		t.Fatalf("%d workflow_call spans, want 2: %s", len(subs), st)
	}
	var entered sdktrace.ReadOnlySpan
	for _, s := range subs {
		if attr(s, "starflow.step_status").AsString() == "waiting" {
			entered = s
		}
		if got := attr(s, "starflow.child_run_id").AsString(); got != child.ID {
			t.Errorf("workflow_call child_run_id %q, want %s", got, child.ID)
		}
	}
	if entered == nil {
		t.Fatalf("no workflow_call span ended waiting: %s", st)
	}
	childEnqueue := st.one("enqueue traced_child")
	wantChild(t, childEnqueue, entered)
	childRun := st.one("run traced_child")
	wantChild(t, childRun, childEnqueue)
	wantChild(t, st.one("context_set twice"), childRun)
}

// attrOfChild is the child run id the workflow_call span names.
func attrOfChild(t *testing.T, rec *tracetest.SpanRecorder) string {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == "workflow_call sub" {
			return attr(s, "starflow.child_run_id").AsString()
		}
	}
	t.Fatal("no workflow_call span")
	return ""
}

// TestTraceFailuresAndAttempts: a step's failure is an error status with
// its scrubbed message (the secret never in a span); a run retried
// (attempt 2) keeps its trace: both attempts' executions are children of
// the one enqueue span.
func TestTraceFailuresAndAttempts(t *testing.T) {
	t.Setenv("TRACE_TEST_TOKEN", "s3cr3t-token-value")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, starflow.Config{TracerProvider: tp})
	var calls atomic.Int32
	if err := h.eng.RegisterStep("leaky", func(_ context.Context, req *step.Request) (any, error) {
		if calls.Add(1) == 1 {
			return nil, fmt.Errorf("upstream refused token %v", req.Input)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.start()
	end := h.runToEnd(`name: attempts
secrets: [TRACE_TEST_TOKEN]
max_attempts: 2
steps:
  - id: leak
    leaky: "${{ secrets.TRACE_TEST_TOKEN }}"
    retry_policy: {max_attempts: 1}
`, nil)
	if end.Status != starflowtype.RunSucceeded || end.Attempt != 2 {
		t.Fatalf("run %s at attempt %d, want succeeded at attempt 2: %s", end.Status, end.Attempt, end.Error)
	}
	st := spanTree{t: t, spans: rec.Ended()}
	enqueue := st.one("enqueue attempts")
	if end.TraceID != enqueue.SpanContext().TraceID().String() {
		t.Errorf("trace_id %q, want the enqueue span's %s", end.TraceID, enqueue.SpanContext().TraceID())
	}
	for _, attempt := range []int{1, 2} {
		x := st.one("run attempts", attribute.Int("starflow.attempt", attempt))
		wantChild(t, x, enqueue)
	}
	failedRun := st.one("run attempts", attribute.Int("starflow.attempt", 1))
	failedStep := st.one("leaky leak", attribute.Int("starflow.attempt", 1))
	for _, s := range []sdktrace.ReadOnlySpan{failedRun, failedStep} {
		if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "upstream refused token ***") {
			t.Errorf("span %q status %+v, want an error with the scrubbed message", s.Name(), s.Status())
		}
		if got := attr(s, "error.type").AsString(); got != "error" {
			t.Errorf("span %q error.type %q, want error", s.Name(), got)
		}
	}
	for _, s := range st.spans {
		if strings.Contains(fmt.Sprint(s.Attributes(), s.Status(), s.Events()), "s3cr3t") {
			t.Errorf("span %q holds the secret", s.Name())
		}
	}
	if got := attr(st.one("leaky leak", attribute.Int("starflow.attempt", 2)), "starflow.step_status").AsString(); got != "succeeded" {
		t.Errorf("attempt 2's step status %q", got)
	}
}

// TestTraceCallerHeader: a traceparent read with ExtractTrace (as the
// HTTP API reads the enqueue request's header) makes the run's trace the
// caller's, its enqueue span a child of the caller's span.
func TestTraceCallerHeader(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, starflow.Config{TracerProvider: tp})
	h.apply(tracedChildDef)
	const header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := h.eng.ExtractTrace(context.Background(), http.Header{"Traceparent": {header}})
	run, err := h.eng.Enqueue(ctx, "traced_child", map[string]any{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace_id %q, want the header's", run.TraceID)
	}
	enq := spanTree{t: t, spans: rec.Ended()}.one("enqueue traced_child")
	if enq.Parent().SpanID().String() != "00f067aa0ba902b7" || !enq.Parent().IsRemote() {
		t.Errorf("enqueue span's parent %s (remote %v), want the header's span 00f067aa0ba902b7", enq.Parent().SpanID(), enq.Parent().IsRemote())
	}
	if _, err := h.eng.Enqueue(h.eng.ExtractTrace(context.Background(), http.Header{"Traceparent": {"00-garbage"}}),
		"traced_child", map[string]any{"n": 1}, nil); err != nil {
		t.Errorf("an invalid traceparent must be ignored, not fail the enqueue: %v", err)
	}
}

// TestTraceOff: with a no-op provider no trace is stored (even when the
// caller has one) and the service gets no traceparent.
func TestTraceOff(t *testing.T) {
	t.Parallel()
	svc := newTraceService(t)
	h := newHarness(t, starflow.Config{TracerProvider: noop.NewTracerProvider()})
	h.start()
	h.apply(`name: untraced
steps:
  - id: call
    service_call: {url: "${{ input.url }}", method: POST, body: {item: one}}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caller := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	run, err := h.eng.Enqueue(caller, "untraced", map[string]any{"url": svc.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	end, err := h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	if end.TraceID != "" || end.TraceParent != "" {
		t.Errorf("tracing off stored trace %q / %q, want none", end.TraceID, end.TraceParent)
	}
	if got, ok := svc.traceparent("one"); !ok || got != "" {
		t.Errorf("tracing off: the service got traceparent %q (called: %v), want none", got, ok)
	}
}
