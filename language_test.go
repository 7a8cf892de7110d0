package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

// The workflow language of issue 14: typed errors, catch_when, retry_on
// and jitter, switch, pass, loop variables, racing lanes.

// statusServer answers every request with the status and JSON body given
// per path ("/404" answers 404), counting requests per path.
type statusServer struct {
	mu    sync.Mutex
	count map[string]int
}

func newStatusServer(t *testing.T) (*statusServer, string) {
	s := &statusServer{count: map[string]int{}}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func (s *statusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.count[r.URL.Path]++
	s.mu.Unlock()
	status := http.StatusOK
	switch r.URL.Path {
	case "/404":
		status = http.StatusNotFound
	case "/400":
		status = http.StatusBadRequest
	case "/503":
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"reason": "path ` + r.URL.Path + `", "code": ` + r.URL.Path[1:] + `}`))
}

func (s *statusServer) requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[path]
}

// TestTypedHTTPErrorInCatch: a 404 is caught as an http error with its
// status and parsed body, step id and scope path; fields that do not apply
// are absent from the value and read as null.
func TestTypedHTTPErrorInCatch(t *testing.T) {
	_, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: typed
steps:
  - id: guard
    try:
      steps:
        - id: get
          service_call: {url: "${{ input.url + '/404' }}"}
      catch:
        - id: seen
          pass:
            error: "${{ error }}"
            details: "${{ error.details }}"
            cause_is_null: "${{ error.cause == null }}"
            legacy_kind: "${{ error.kind }}"
`, map[string]any{"url": url})
	mustSucceed(t, run)
	out := outputOf(t, run)
	e := out["error"].(map[string]any)
	if e["type"] != "http" || e["status"] != float64(404) || e["step_id"] != "get" || e["scope_path"] != "" {
		t.Fatalf("error %v", e)
	}
	if body, _ := e["body"].(map[string]any); body["reason"] != "path /404" || body["code"] != float64(404) {
		t.Fatalf("body %v", e["body"])
	}
	if !strings.Contains(e["message"].(string), "answered 404") {
		t.Fatalf("message %q", e["message"])
	}
	for _, absent := range []string{"cause", "details"} {
		if _, ok := e[absent]; ok {
			t.Errorf("error has %s: %v", absent, e)
		}
	}
	if out["details"] != nil || out["cause_is_null"] != true || out["legacy_kind"] != "service_call" {
		t.Fatalf("output %v", out)
	}
}

// TestCatchWhen: catch_when catches only what it says; a declined failure
// propagates unchanged, after finally.
func TestCatchWhen(t *testing.T) {
	_, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	src := `
name: selective
steps:
  - id: guard
    try:
      steps:
        - id: get
          service_call: {url: "${{ input.url + input.path }}"}
      catch_when: "error.type == 'http' && error.status == 404"
      catch:
        - id: missing
          pass: not found
      finally:
        - id: cleanup
          context_set: {cleaned: true}
`
	run := h.runToEnd(src, map[string]any{"url": url, "path": "/404"})
	mustSucceed(t, run)
	if string(run.Output) != `"not found"` {
		t.Fatalf("output %s", run.Output)
	}
	run = h.runToEnd(src, map[string]any{"url": url, "path": "/400"})
	if run.Status != starflowtype.RunFailed {
		t.Fatalf("a 400 was caught: %s %s", run.Status, run.Output)
	}
	detail := jsonOf(t, run.ErrorDetail)
	if detail["type"] != "http" || detail["status"] != float64(400) || detail["step_id"] != "get" {
		t.Fatalf("error_detail %v", detail)
	}
	rows := strings.Join(ledgerRows(h, run.ID), " ")
	if !strings.Contains(rows, "-|cleanup|context_set|succeeded") || strings.Contains(rows, "missing") {
		t.Fatalf("finally did not run, or catch did: %s", rows)
	}
}

// TestRetryOn: retry_on retries what it names (a 404 here) and nothing
// else; without it a 404 is not retried and a 503 is.
func TestRetryOn(t *testing.T) {
	srv, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: retry-404
max_attempts: 1
steps:
  - id: get
    service_call: {url: "${{ input.url + '/404' }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms, jitter: none, retry_on: "error.status == 404"}
`, map[string]any{"url": url})
	if run.Status != starflowtype.RunFailed || srv.requests("/404") != 3 {
		t.Fatalf("retry_on 404: %s after %d requests", run.Status, srv.requests("/404"))
	}
	run = h.runToEnd(`
name: retry-default
max_attempts: 1
steps:
  - id: get
    service_call: {url: "${{ input.url + input.path }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms, jitter: full}
`, map[string]any{"url": url, "path": "/400"})
	if run.Status != starflowtype.RunFailed || srv.requests("/400") != 1 {
		t.Fatalf("default 400: %s after %d requests", run.Status, srv.requests("/400"))
	}
	run = h.runToEnd(`
name: retry-default
max_attempts: 1
steps:
  - id: get
    service_call: {url: "${{ input.url + input.path }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms, jitter: full}
`, map[string]any{"url": url, "path": "/503"})
	if run.Status != starflowtype.RunFailed || srv.requests("/503") != 3 {
		t.Fatalf("default 503: %s after %d requests", run.Status, srv.requests("/503"))
	}
	run = h.runToEnd(`
name: retry-never
max_attempts: 1
steps:
  - id: get
    service_call: {url: "${{ input.url + '/503' }}"}
    retry_policy: {max_attempts: 3, initial_interval: 1ms, retry_on: "error.type != 'http'"}
`, map[string]any{"url": url})
	if run.Status != starflowtype.RunFailed || srv.requests("/503") != 4 {
		t.Fatalf("retry_on false for a 503: %s after %d requests", run.Status, srv.requests("/503")-3)
	}
}

// TestFailTypedAndReraised: a fail step's type and details reach a catch,
// a re-raise keeps them, and the run's error_detail has them.
func TestFailTypedAndReraised(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: reraise
steps:
  - id: guard
    try:
      steps:
        - id: refuse
          fail: {message: "card declined", type: PaymentDeclined, details: {code: "${{ input.code }}"}}
      catch:
        - id: note
          context_set: {seen: "${{ error.type }}"}
        - id: again
          fail: {message: "${{ error.message }}", type: "${{ error.type }}", details: "${{ error.details }}"}
`, map[string]any{"code": 51})
	if run.Status != starflowtype.RunFailed {
		t.Fatalf("run %s", run.Status)
	}
	if run.Attempt != 1 {
		t.Fatalf("a fail step was retried at run level: attempt %d", run.Attempt)
	}
	detail := jsonOf(t, run.ErrorDetail)
	want := map[string]any{"type": "PaymentDeclined", "message": "card declined", "step_id": "again", "scope_path": "",
		"details": map[string]any{"code": float64(51)}}
	if !reflect.DeepEqual(detail, want) {
		t.Fatalf("error_detail %v, want %v", detail, want)
	}
	if !strings.Contains(run.Error, "card declined") {
		t.Fatalf("error column %q", run.Error)
	}
}

// TestCustomStepTypedError: a handler's step.Error gives the type,
// details and the default retry decision.
func TestCustomStepTypedError(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("charge", func(context.Context, *step.Request) (any, error) {
		if calls.Add(1) < 3 {
			return nil, &step.Error{Type: "GatewayBusy", Message: "busy", Retryable: true}
		}
		return nil, &step.Error{Type: "CardExpired", Message: "expired", Details: map[string]any{"month": 11}}
	})
	h.start()
	run := h.runToEnd(`
name: custom-typed
steps:
  - id: guard
    try:
      steps:
        - id: pay
          charge: {}
          retry_policy: {max_attempts: 5, initial_interval: 1ms}
      catch_when: "error.type == 'CardExpired'"
      catch:
        - id: seen
          pass: "${{ [error.type, error.message, error.details.month] }}"
`, nil)
	mustSucceed(t, run)
	if string(run.Output) != `["CardExpired","expired",11]` || calls.Load() != 3 {
		t.Fatalf("output %s after %d calls", run.Output, calls.Load())
	}
}

// TestDefinitionRetryOn: the definition's retry_on decides run attempts.
func TestDefinitionRetryOn(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("flip", func(context.Context, *step.Request) (any, error) {
		if calls.Add(1) == 1 {
			return nil, &step.Error{Type: "Stale", Message: "stale view"} // not retryable by default
		}
		return "fresh", nil
	})
	h.start()
	run := h.runToEnd(`
name: def-retry
max_attempts: 3
retry_on: "error.type == 'Stale'"
steps:
  - id: read
    flip: {}
`, nil)
	mustSucceed(t, run)
	if run.Attempt != 2 || string(run.Output) != `"fresh"` {
		t.Fatalf("attempt %d output %s", run.Attempt, run.Output)
	}
}

// TestSwitchAndPass: the first true case runs; default when none; null
// output when there is no default; pass shapes values.
func TestSwitchAndPass(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	src := `
name: choose
steps:
  - id: pick
    switch:
      cases:
        - when: "input.n > 10"
          steps: [{id: big, pass: "big"}]
        - when: "input.n > 5"
          steps: [{id: medium, pass: "${{ 'medium ' + string(input.n) }}"}]
        - when: "${{ input.n > 0 }}"
          steps: [{id: small, pass: {size: small, n: "${{ input.n }}"}}]
      default:
        - {id: none, pass: null}
  - id: after
    pass: "${{ steps.pick.output }}"
`
	for n, want := range map[int]string{20: `"big"`, 7: `"medium 7"`, 1: `{"n":1,"size":"small"}`, 0: `null`} {
		run := h.runToEnd(src, map[string]any{"n": n})
		mustSucceed(t, run)
		if string(run.Output) != want {
			t.Errorf("n=%d: output %s, want %s", n, run.Output, want)
		}
	}
	run := h.runToEnd(`
name: no-default
steps:
  - id: pick
    switch:
      cases:
        - {when: false, steps: [{id: never, pass: 1}]}
`, nil)
	mustSucceed(t, run)
	if string(run.Output) != "null" {
		t.Fatalf("output %s", run.Output)
	}
	if rows := ledgerRows(h, run.ID); !reflect.DeepEqual(rows, []string{"-|pick|switch|succeeded"}) {
		t.Fatalf("ledger %v", rows)
	}
}

// TestLoopVariables: index (and index_as) in for_each, iteration in
// repeat_until.
func TestLoopVariables(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: loops
steps:
  - id: each
    for_each:
      items: "input.xs"
      concurrency: 2
      steps:
        - id: inner
          for_each:
            items: "[10, 20]"
            as: y
            index_as: j
            steps:
              - id: cell
                pass: "${{ string(index) + '.' + string(j) + '=' + string(item * y) }}"
  - id: loop
    repeat_until:
      max_iterations: 5
      until: "iteration == 2"
      steps:
        - id: tick
          pass: "${{ iteration * 100 }}"
  - id: out
    pass: {each: "${{ steps.each.output }}", loop: "${{ steps.loop.output }}"}
`, map[string]any{"xs": []int{1, 2}})
	mustSucceed(t, run)
	want := `{"each":[["0.0=10","0.1=20"],["1.0=20","1.1=40"]],"loop":200}`
	if string(run.Output) != want {
		t.Fatalf("output %s, want %s", run.Output, want)
	}
}

// TestServiceCallRequestInOutput: the output carries the request sent,
// with credentials scrubbed.
func TestServiceCallRequestInOutput(t *testing.T) {
	_, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: echo
steps:
  - id: get
    service_call:
      url: "${{ input.url + '/200' }}"
      headers: {Authorization: "Bearer abc123", X-Trace: t1}
    output: "${{ output.request }}"
`, map[string]any{"url": url})
	mustSucceed(t, run)
	req := outputOf(t, run)
	headers := req["headers"].(map[string]any)
	if req["method"] != "GET" || req["url"] != url+"/200" || headers["x-trace"] != "t1" {
		t.Fatalf("request %v", req)
	}
	if strings.Contains(string(run.Output), "abc123") {
		t.Fatalf("the Authorization value is in the output: %s", run.Output)
	}
}

// gate is a step type whose tries block until their label's gate opens
// (or the step is cancelled), then return the label.
type gate struct {
	mu      sync.Mutex
	open    map[string]chan struct{}
	started chan string
}

func newGate() *gate { return &gate{open: map[string]chan struct{}{}, started: make(chan string, 16)} }

func (g *gate) ch(label string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.open[label]
	if !ok {
		c = make(chan struct{})
		g.open[label] = c
	}
	return c
}

func (g *gate) release(label string) { close(g.ch(label)) }

func (g *gate) fn(ctx context.Context, req *step.Request) (any, error) {
	label, _ := req.Input.(map[string]any)["label"].(string)
	g.started <- label
	select {
	case <-g.ch(label):
		if strings.HasPrefix(label, "fail") {
			return nil, step.Permanent(&step.Error{Type: "LaneFailed", Message: label})
		}
		return label, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (g *gate) waitStarted(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.started:
		case <-time.After(10 * time.Second):
			t.Fatal("gate step not started")
		}
	}
}

// TestRaceFirstLaneWins: the first lane to succeed wins; the other lane's
// running step is recorded cancelled; the output is {lane, output}.
func TestRaceFirstLaneWins(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	g := newGate()
	h.eng.RegisterStep("gate", g.fn)
	h.start()
	d := h.apply(`
name: race
steps:
  - id: first
    parallel:
      mode: race
      lanes:
        fast: [{id: f1, gate: {label: fast}}]
        slow:
          - {id: s1, gate: {label: slow}}
          - {id: s2, pass: never}
`)
	ctx := context.Background()
	r, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t, 2)
	g.release("fast")
	run := wait(t, h.eng, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `{"lane":"fast","output":"fast"}` {
		t.Fatalf("output %s", run.Output)
	}
	rows := rowSet(h, run.ID)
	want := []string{"-|first|parallel|succeeded", "first.lane_fast|f1|gate|succeeded",
		"first.lane_slow|s1|gate|cancelled", "first.lane_slow|s2|pass|skipped"}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("ledger %v, want %v", rows, want)
	}
}

// TestRaceAllFail: when every lane fails, the step fails with the error
// of the last lane to fail.
func TestRaceAllFail(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	g := newGate()
	h.eng.RegisterStep("gate", g.fn)
	h.start()
	d := h.apply(`
name: race-fail
steps:
  - id: first
    parallel:
      mode: race
      lanes:
        a: [{id: a1, gate: {label: fail-a}}]
        b: [{id: b1, gate: {label: fail-b}}]
`)
	r, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t, 2)
	g.release("fail-b")
	time.Sleep(50 * time.Millisecond) // b fails first, then a
	g.release("fail-a")
	run := wait(t, h.eng, r.ID)
	detail := jsonOf(t, run.ErrorDetail)
	if run.Status != starflowtype.RunFailed || detail["type"] != "LaneFailed" || detail["message"] != "fail-a" {
		t.Fatalf("run %s, error_detail %v", run.Status, detail)
	}
}

// TestChildFailedCause: a child run's typed error is the cause of the
// parent's child_failed.
func TestChildFailedCause(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`
name: child
max_attempts: 1
steps:
  - id: boom
    fail: {message: "out of stock", type: OutOfStock, details: {sku: "${{ input.sku }}"}}
`)
	run := h.runToEnd(`
name: parent
steps:
  - id: guard
    try:
      steps:
        - id: call
          workflow_call: {workflow: child, input: {sku: A1}}
      catch:
        - id: seen
          pass: "${{ error }}"
`, nil)
	mustSucceed(t, run)
	e := outputOf(t, run)
	cause, _ := e["cause"].(map[string]any)
	if e["type"] != "child_failed" || e["step_id"] != "call" || cause["type"] != "OutOfStock" ||
		cause["step_id"] != "boom" || !reflect.DeepEqual(cause["details"], map[string]any{"sku": "A1"}) {
		t.Fatalf("error %v", e)
	}
}

// TestTypedErrorSurvivesResume: an error caught before the run paused at
// a wait is the same typed error after the wake (the catch is re-entered
// in a new execution of the run).
func TestTypedErrorSurvivesResume(t *testing.T) {
	_, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	d := h.apply(`
name: caught-then-wait
recovery_mode: resume
steps:
  - id: guard
    try:
      steps:
        - id: get
          service_call: {url: "${{ input.url + '/404' }}"}
      catch:
        - id: hold
          wait: {signal: go}
        - id: seen
          pass: "${{ [error.type, error.status, error.body.reason, steps.hold.output.note] }}"
`)
	ctx := context.Background()
	r, err := h.eng.Enqueue(ctx, d.Name, map[string]any{"url": url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitParked(t, h, r.ID)
	if _, err := h.eng.Signal(ctx, r.ID, "go", json.RawMessage(`{"note": "resumed"}`)); err != nil {
		t.Fatal(err)
	}
	run := wait(t, h.eng, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `["http",404,"path /404","resumed"]` {
		t.Fatalf("output %s", run.Output)
	}
}

// TestSwitchResumedInside: a run cut off inside a switch's branch resumes
// in the same branch: the steps checkpointed before are restored, not
// executed again, and the output is an uninterrupted run's.
func TestSwitchResumedInside(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	rc := interruptAndResume(t, h, `
name: switch-resume
steps:
  - id: pick
    switch:
      cases:
        - when: "input.n > 5"
          steps:
            - {id: a, rec: {label: a}}
            - {id: b, rec: {label: b}}
            - {id: c, rec: {label: c}}
      default:
        - {id: d, rec: {label: d}}
  - id: after
    pass: "${{ steps.pick.output }}"
`, map[string]any{"n": 7}, 2)
	rc.check(t)
	if !rc.checkpointed["|a"] || rc.checkpointed["|b"] {
		t.Fatalf("checkpoints before the interruption: %v", rc.checkpointed)
	}
	if string(rc.interrupted.Output) != `{"label":"c","scope":""}` {
		t.Fatalf("output %s", rc.interrupted.Output)
	}
}

// engineOn starts a second engine on h's store with the gate step type.
func engineOn(t *testing.T, h *harness, g *gate) *starflow.Engine {
	t.Helper()
	eng, err := starflow.New(starflow.Config{Store: h.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.RegisterStep("gate", g.fn); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Stop(ctx)
	})
	return eng
}

// stopNow stops an engine with a short grace: the steps in flight are cut
// off and the run's lease released.
func stopNow(t *testing.T, eng *starflow.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

const raceResumeWF = `
name: race-resume
steps:
  - id: first
    parallel:
      mode: race
      lanes:
        fast: [{id: f1, gate: {label: fast}}]
        slow: [{id: s1, gate: {label: slow}}]
  - id: after
    gate: {label: after}
  - id: out
    pass: "${{ steps.first.output }}"
`

// TestRaceCutOffMidFlightAndResumed: a race cut off before any lane won
// is decided by the next execution (here the other lane wins).
func TestRaceCutOffMidFlightAndResumed(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	g1 := newGate()
	h.eng.RegisterStep("gate", g1.fn)
	h.start()
	d := h.apply(raceResumeWF)
	r, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g1.waitStarted(t, 2) // both lanes in flight
	stopNow(t, h.eng)

	g2 := newGate()
	g2.release("slow")
	g2.release("after")
	eng2 := engineOn(t, h, g2)
	run := wait(t, eng2, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `{"lane":"slow","output":"slow"}` {
		t.Fatalf("output %s", run.Output)
	}
}

// TestRaceWinnerNeverChangesOnResume: once a lane won, a run cut off
// later restores the race whole: the same winner, though another lane
// would win now, and no lane runs again.
func TestRaceWinnerNeverChangesOnResume(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	g1 := newGate()
	h.eng.RegisterStep("gate", g1.fn)
	h.start()
	d := h.apply(raceResumeWF)
	r, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g1.waitStarted(t, 2)
	g1.release("fast")
	g1.waitStarted(t, 1) // "after" is in flight: the race was decided
	stopNow(t, h.eng)
	if rows := rowSet(h, r.ID); !reflect.DeepEqual(rows[:3], []string{"-|after|gate|running", "-|first|parallel|succeeded",
		"first.lane_fast|f1|gate|succeeded"}) || rows[3] != "first.lane_slow|s1|gate|cancelled" {
		t.Fatalf("ledger at the interruption %v", rows)
	}

	g2 := newGate()
	g2.release("slow")
	g2.release("after")
	eng2 := engineOn(t, h, g2)
	run := wait(t, eng2, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `{"lane":"fast","output":"fast"}` {
		t.Fatalf("output %s: the winner changed", run.Output)
	}
	close(g2.started)
	var again []string
	for label := range g2.started {
		again = append(again, label)
	}
	if !reflect.DeepEqual(again, []string{"after"}) {
		t.Fatalf("steps run by the second engine: %v, want only after", again)
	}
}

// TestBuiltInErrorTypes: each built-in error type, as a catch sees it.
func TestBuiltInErrorTypes(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.eng.RegisterStep("sleepy", func(ctx context.Context, _ *step.Request) (any, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	h.eng.RegisterStep("plain", func(context.Context, *step.Request) (any, error) {
		return nil, step.Permanent(errors.New("plain failure"))
	})
	h.start()
	h.apply(`
name: strict-child
input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
steps: [{id: c, pass: "${{ input.sku }}"}]
`)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close() // nothing listens there now
	cases := []struct {
		name, step, want string
	}{
		{"network", `service_call: {url: "` + closedURL + `/x"}
          retry_policy: {max_attempts: 1}`, "network"},
		{"timeout", `sleepy: {}
          timeout: 20ms
          retry_policy: {max_attempts: 1}`, "timeout"},
		{"expression", `pass: "${{ input.missing.deeper }}"`, "expression"},
		{"egress refused", `service_call: {url: "http://169.254.169.254/latest/meta-data"}`, "egress_refused"},
		{"input invalid", `workflow_call: {workflow: strict-child, input: {sku: 7}}`, "input_invalid"},
		{"max iterations", `repeat_until: {max_iterations: 2, until: false, steps: [{id: tick, pass: 1}]}`, "max_iterations_exceeded"},
		{"fail default", `fail: {message: stop}`, "fail"},
		{"untyped", `plain: {}`, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := h.runToEnd(`
name: types
steps:
  - id: guard
    try:
      steps:
        - id: s
          `+c.step+`
      catch:
        - id: seen
          pass: "${{ error }}"
`, map[string]any{})
			mustSucceed(t, run)
			e := outputOf(t, run)
			if e["type"] != c.want || e["step_id"] != "s" || e["message"] == "" {
				t.Fatalf("error %v, want type %s at step s", e, c.want)
			}
		})
	}
}

// TestRaceParkedLaneKeepsItOpen: a lane parked at a durable wait keeps
// the race open when the other lane fails; the woken lane wins.
func TestRaceParkedLaneKeepsItOpen(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	d := h.apply(`
name: race-parked
steps:
  - id: race
    parallel:
      mode: race
      lanes:
        fails: [{id: quick_failure, fail: {message: this lane failed, type: LaneFailed}}]
        waits:
          - {id: pause, wait: {signal: go}}
          - {id: answer, pass: waited and won}
`)
	ctx := context.Background()
	r, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitParked(t, h, r.ID)
	if _, err := h.eng.Signal(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	run := wait(t, h.eng, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `{"lane":"waits","output":"waited and won"}` {
		t.Fatalf("output %s", run.Output)
	}
}

// TestFailedRunLeavesNoWaitingStep: a run failed by one lane while
// another waits does not leave that step waiting in its ledger.
func TestFailedRunLeavesNoWaitingStep(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	g := newGate()
	h.eng.RegisterStep("gate", g.fn)
	h.start()
	d := h.apply(`
name: fail-while-waiting
max_attempts: 1
steps:
  - id: par
    parallel:
      lanes:
        fails: [{id: boom, gate: {label: fail-late}}]
        waits: [{id: pause, wait: {signal: go}}]
`)
	r, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t, 1)
	deadline := time.Now().Add(10 * time.Second)
	for len(h.waits(r.ID)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the wait never registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.release("fail-late") // the other lane fails while pause waits
	run := awaitEnd(t, h, r.ID)
	if run.Status != starflowtype.RunFailed {
		t.Fatalf("run %s", run.Status)
	}
	for _, row := range ledgerRows(h, run.ID) {
		if strings.HasSuffix(row, "|waiting") || strings.HasSuffix(row, "|running") {
			t.Fatalf("a row of the failed run is still open: %s (ledger %v)", row, ledgerRows(h, run.ID))
		}
	}
}

// TestRaceOutputFailureIsCaught: a race whose own output expression fails
// is recorded failed and its failure is caught like any step's.
func TestRaceOutputFailureIsCaught(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: race-output
steps:
  - id: guard
    try:
      steps:
        - id: r
          output: "${{ output.nope.deeper }}"
          parallel:
            mode: race
            lanes:
              a: [{id: a1, pass: 1}]
              b: [{id: b1, pass: 2}]
      catch:
        - id: seen
          pass: "${{ [error.type, error.step_id] }}"
`, nil)
	mustSucceed(t, run)
	if string(run.Output) != `["expression","r"]` {
		t.Fatalf("output %s", run.Output)
	}
	rows := strings.Join(ledgerRows(h, run.ID), " ")
	if !strings.Contains(rows, "-|r|parallel|failed") {
		t.Fatalf("the race's row: %s", rows)
	}
}

// TestRaceFailedLaneNotRunAgain: a lane that failed while another lane
// waits is not run again when the race is re-entered after the wake.
func TestRaceFailedLaneNotRunAgain(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("charge", func(context.Context, *step.Request) (any, error) {
		if calls.Add(1) == 1 {
			return nil, step.Permanent(errors.New("declined"))
		}
		return "charged", nil
	})
	h.start()
	d := h.apply(`
name: race-failed-lane
steps:
  - id: race
    parallel:
      mode: race
      lanes:
        fails: [{id: boom, charge: {}}]
        waits:
          - {id: pause, wait: {signal: go}}
          - {id: answer, pass: waited}
`)
	ctx := context.Background()
	r, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitParked(t, h, r.ID)
	if _, err := h.eng.Signal(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	run := wait(t, h.eng, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `{"lane":"waits","output":"waited"}` || calls.Load() != 1 {
		t.Fatalf("output %s after %d calls of the failed lane's step", run.Output, calls.Load())
	}
	if n := countEvents(h.events(run.ID), starflowtype.EventNodeStart, "boom"); n != 1 {
		t.Fatalf("boom started %d times", n)
	}
}

// TestLoopNamesOfOldDefinitions: an item named iteration or index (valid
// before those names existed) is not hidden by a nested loop's implicit
// iteration or index.
func TestLoopNamesOfOldDefinitions(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: old-names
steps:
  - id: outer
    for_each:
      items: "['a', 'b']"
      as: iteration
      steps:
        - id: loop
          repeat_until:
            max_iterations: 1
            until: true
            steps: [{id: v, pass: "${{ iteration }}"}]
  - id: outer2
    for_each:
      items: "['c']"
      as: index
      steps:
        - id: inner
          for_each:
            items: "[1]"
            steps: [{id: w, pass: "${{ index }}"}]
  - id: out
    pass: ["${{ steps.outer.output }}", "${{ steps.outer2.output }}"]
`, nil)
	mustSucceed(t, run)
	if string(run.Output) != `[["a","b"],[["c"]]]` {
		t.Fatalf("output %s", run.Output)
	}
}

// TestFinalFailuresAreNeverRetried: retry_on (step or definition level)
// does not retry a fail step, an expression error or a handler's
// step.Permanent.
func TestFinalFailuresAreNeverRetried(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("hopeless", func(context.Context, *step.Request) (any, error) {
		calls.Add(1)
		return nil, step.Permanent(errors.New("hopeless"))
	})
	h.start()
	for name, body := range map[string]string{
		"fail":       `fail: {message: stop, type: network}`,
		"expression": `pass: "${{ input.missing.deeper }}"`,
		"permanent":  `hopeless: {}`,
	} {
		t.Run(name, func(t *testing.T) {
			run := h.runToEnd(`
name: final-`+name+`
max_attempts: 3
retry_on: "true"
defaults:
  retry_policy: {max_attempts: 4, initial_interval: 1ms, retry_on: "true"}
steps:
  - id: s
    `+body+`
`, map[string]any{})
			if run.Status != starflowtype.RunFailed || run.Attempt != 1 {
				t.Fatalf("run %s at attempt %d", run.Status, run.Attempt)
			}
			if n := countEvents(h.events(run.ID), starflowtype.EventNodeRetry, "s"); n != 0 {
				t.Fatalf("%d retries", n)
			}
		})
	}
	if calls.Load() != 1 {
		t.Fatalf("the permanent handler ran %d times", calls.Load())
	}
}

// TestErrorBodyIsPlainData: the null-when-absent rule is the error's own:
// its body reads as the data it is.
func TestErrorBodyIsPlainData(t *testing.T) {
	_, url := newStatusServer(t)
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: body-data
steps:
  - id: guard
    try:
      steps:
        - id: get
          service_call: {url: "${{ input.url + '/404' }}"}
      catch:
        - id: seen
          pass: "${{ [has(error.body.status), 'reason' in error.body, has(error.details), error.body.code] }}"
`, map[string]any{"url": url})
	mustSucceed(t, run)
	if string(run.Output) != `[false,true,true,404]` {
		t.Fatalf("output %s", run.Output)
	}
}

// TestRaceFailureCaughtKeepsItsTypeAfterWake: a race every lane of which
// failed, caught by a try whose catch waits, is run again when the try is
// re-entered after the wake, and the catch sees the same typed error.
func TestRaceFailureCaughtKeepsItsTypeAfterWake(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	d := h.apply(`
name: race-caught
steps:
  - id: guard
    try:
      steps:
        - id: race
          parallel:
            mode: race
            lanes:
              a: [{id: fa, fail: {message: no a, type: RefusedA}}]
      catch:
        - id: hold
          wait: {signal: go}
        - id: seen
          pass: "${{ error.type }}"
`)
	ctx := context.Background()
	r, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitParked(t, h, r.ID)
	if _, err := h.eng.Signal(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	run := wait(t, h.eng, r.ID)
	mustSucceed(t, run)
	if string(run.Output) != `"RefusedA"` {
		t.Fatalf("output %s", run.Output)
	}
}
