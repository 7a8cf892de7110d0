package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// ledgerRows lists a run's step rows as "scope|step|kind|status" (the
// scope path "" shown as "-"), in ledger order.
func ledgerRows(h *harness, runID string) []string {
	h.t.Helper()
	var out []string
	for _, s := range h.steps(runID) {
		scope := s.ScopePath
		if scope == "" {
			scope = "-"
		}
		out = append(out, fmt.Sprintf("%s|%s|%s|%s", scope, s.StepID, s.Kind, s.Status))
	}
	return out
}

// rowSet is ledgerRows sorted (for runs whose items or lanes interleave).
func rowSet(h *harness, runID string) []string {
	rows := ledgerRows(h, runID)
	sort.Strings(rows)
	return rows
}

func mustSucceed(t *testing.T, run *starflowtype.Run) {
	t.Helper()
	if run.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s (attempt %d): %s", run.Status, run.Attempt, run.Error)
	}
}

func outputOf(t *testing.T, run *starflowtype.Run) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatalf("output %s: %v", run.Output, err)
	}
	return out
}

func checkpointOf(h *harness, runID, scope, stepID string) *starflowtype.Checkpoint {
	for _, c := range h.checkpoints(runID) {
		if c.ScopePath == scope && c.StepID == stepID {
			return c
		}
	}
	return nil
}

func TestIfConstruct(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	const src = `
name: branching
steps:
  - id: a
    context_set: {n: "${{ input.n }}"}
  - id: check
    if:
      condition: "${{ variables.n > 10 }}"
      then:
        - id: big
          context_set: {size: big}
      else:
        - id: small
          context_set: {size: small}
        - id: small2
          context_set: {seen: "${{ steps.small.output.size }}"}
  - id: none
    if:
      condition: "variables.n > 100"
      then:
        - id: huge
          context_set: {size: huge}
  - id: after
    context_set:
      out: "${{ steps.check.output }}"
      none: "${{ steps.none.output }}"
      hidden: "${{ 'small' in steps }}"
output: "${{ variables }}"
`
	run := h.runToEnd(src, map[string]any{"n": 1})
	mustSucceed(t, run)
	want := `{"hidden":false,"n":1,"none":null,"out":{"seen":"small"},"seen":"small","size":"small"}`
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	wantRows := []string{"-|a|context_set|succeeded", "-|check|if|succeeded", "-|small|context_set|succeeded",
		"-|small2|context_set|succeeded", "-|none|if|succeeded", "-|after|context_set|succeeded"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
	if n := len(h.checkpoints(run.ID)); n != 6 {
		t.Fatalf("%d checkpoints, want one per succeeded instance (6)", n)
	}
	cp := checkpointOf(h, run.ID, "", "check")
	if cp == nil || string(cp.Output) != `{"seen":"small"}` || string(cp.Context) != `{"seen":"small","size":"small"}` {
		t.Fatalf("checkpoint of the if: %+v", cp)
	}
	big := h.runToEnd(src, map[string]any{"n": 11})
	mustSucceed(t, big)
	if out := outputOf(t, big); out["size"] != "big" || !reflect.DeepEqual(out["out"], map[string]any{"size": "big"}) {
		t.Fatalf("then branch: %s", big.Output)
	}
}

func TestTryCatchFinally(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd(`
name: trying
steps:
  - id: guarded
    try:
      steps:
        - id: before
          context_set: {x: 1}
        - id: boom
          fail: {message: "${{ 'bad order ' + input.id }}"}
        - id: never
          context_set: {y: 1}
      catch:
        - id: handle
          context_set:
            caught: "${{ error.step_id + ':' + error.kind + ':' + error.message }}"
            x_seen: "${{ variables.x }}"
      finally:
        - id: cleanup
          context_set: {cleaned: true}
  - id: after
    context_set: {guard_out: "${{ steps.guarded.output }}"}
output: "${{ variables }}"
`, map[string]any{"id": "o-1"})
	mustSucceed(t, run)
	want := `{"caught":"boom:fail:bad order o-1","cleaned":true,` +
		`"guard_out":{"caught":"boom:fail:bad order o-1","x_seen":1},"x":1,"x_seen":1}`
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	wantRows := []string{"-|guarded|try|succeeded", "-|before|context_set|succeeded", "-|boom|fail|failed",
		"-|never|context_set|skipped", "-|handle|context_set|succeeded", "-|cleanup|context_set|succeeded",
		"-|after|context_set|succeeded"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
	cp := checkpointOf(h, run.ID, "", "guarded")
	if cp == nil || string(cp.Output) != `{"caught":"boom:fail:bad order o-1","x_seen":1}` {
		t.Fatalf("checkpoint of the try: %+v", cp)
	}
}

// TestTryWithoutCatchPropagates: with no catch, the failure propagates
// after finally ran; a permanent failure fails the run at once, a
// transient one inside the try still gets a new attempt.
func TestTryWithoutCatchPropagates(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	var calls atomic.Int64
	h.eng.RegisterStep("flaky", func(context.Context, *step.Request) (any, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("downstream unavailable") // transient
		}
		return "ok", nil
	})
	h.start()
	run := h.runToEnd(`
name: no-catch
steps:
  - id: t
    try:
      steps:
        - id: boom
          fail: {message: nope}
      finally:
        - id: cleanup
          context_set: {cleaned: true}
  - id: after
    context_set: {x: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "nope") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	wantRows := []string{"-|t|try|failed", "-|boom|fail|failed", "-|cleanup|context_set|succeeded", "-|after|context_set|skipped"}
	if got := ledgerRows(h, run.ID); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", got, wantRows)
	}
	run = h.runToEnd(`
name: transient-in-try
max_attempts: 2
steps:
  - id: t
    try:
      steps:
        - id: call
          flaky: {}
          retry_policy: {max_attempts: 1}
`, nil)
	mustSucceed(t, run)
	if run.Attempt != 2 || string(run.Output) != `"ok"` {
		t.Fatalf("transient failure inside a try: attempt %d output %s", run.Attempt, run.Output)
	}
}

// execCounter counts executions of the rec step per "scope|step".
type execCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newExecCounter() *execCounter { return &execCounter{n: map[string]int{}} }

func (c *execCounter) add(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
	return c.n[k]
}

func (c *execCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// recStep is a custom step whose output depends only on its input and
// scope; it counts its executions. When blockAt > 0, the blockAt-th
// execution signals entered and blocks until its context ends.
func recStep(c *execCounter, blockAt int64, entered chan<- struct{}) step.Func {
	var calls atomic.Int64
	return func(ctx context.Context, req *step.Request) (any, error) {
		if blockAt > 0 && calls.Add(1) == blockAt {
			entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c.add(req.ScopePath + "|" + req.StepID)
		in, _ := req.Input.(map[string]any)
		return map[string]any{"label": in["label"], "scope": req.ScopePath}, nil
	}
}

// resumeCase is what interruptAndResume observed.
type resumeCase struct {
	interrupted, reference *starflowtype.Run
	first, second          map[string]int // executions per "scope|step" before and after the interruption
	checkpointed           map[string]bool
}

// interruptAndResume applies src and runs it on h's engine until the
// blockAt-th execution of a rec step, stops that engine gracefully with a
// short grace (the blocked step is cut off), then finishes the run on a
// second engine on the same store, and runs the definition once more,
// uninterrupted, on the second engine for reference.
func interruptAndResume(t *testing.T, h *harness, src string, input any, blockAt int64) *resumeCase {
	t.Helper()
	first := newExecCounter()
	entered := make(chan struct{}, 1)
	if err := h.eng.RegisterStep("rec", recStep(first, blockAt, entered)); err != nil {
		t.Fatal(err)
	}
	if err := h.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := h.apply(src)
	run, err := h.eng.Enqueue(context.Background(), d.Name, input, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the blocking step was never reached")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // grace period
	defer cancel()
	if err := h.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := h.store.GetRun(context.Background(), &state.GetRunParams{ID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if r.ClaimState != starflowtype.ClaimQueued || r.LeasedBy != "" {
		t.Fatalf("after stop: %s/%s leased_by %q", r.Status, r.ClaimState, r.LeasedBy)
	}
	rc := &resumeCase{first: first.snapshot(), checkpointed: map[string]bool{}}
	for _, c := range h.checkpoints(run.ID) {
		rc.checkpointed[c.ScopePath+"|"+c.StepID] = true
	}
	second := newExecCounter()
	eng2, err := starflow.New(starflow.Config{Store: h.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng2.RegisterStep("rec", recStep(second, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if err := eng2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		eng2.Stop(sctx)
	}()
	rc.interrupted = wait(t, eng2, run.ID)
	rc.second = second.snapshot()
	ref, err := eng2.Enqueue(context.Background(), d.Name, input, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.reference = wait(t, eng2, ref.ID)
	return rc
}

// check asserts that the interrupted run ended like the uninterrupted one
// and that no instance checkpointed before the interruption ran again.
func (rc *resumeCase) check(t *testing.T) {
	t.Helper()
	mustSucceed(t, rc.interrupted)
	mustSucceed(t, rc.reference)
	if string(rc.interrupted.Output) != string(rc.reference.Output) {
		t.Fatalf("resumed output differs from an uninterrupted run's\nresumed  %s\nreference %s", rc.interrupted.Output, rc.reference.Output)
	}
	if rc.interrupted.Attempt != 1 || rc.interrupted.LeaseEpoch != 2 {
		t.Fatalf("attempt %d epoch %d, want the same attempt continued by a second claim", rc.interrupted.Attempt, rc.interrupted.LeaseEpoch)
	}
	if len(rc.second) == 0 {
		t.Fatal("the second engine executed nothing: the interruption came too late to test resume")
	}
	for k := range rc.second {
		if rc.checkpointed[k] {
			t.Errorf("instance %s had a checkpoint before the interruption and was executed again", k)
		}
	}
	for k, n := range rc.first {
		if n != 1 {
			t.Errorf("instance %s executed %d times by the first engine", k, n)
		}
	}
	for k, n := range rc.second {
		if n != 1 {
			t.Errorf("instance %s executed %d times by the second engine", k, n)
		}
	}
}

// TestTryResumedInside: a run cut off inside a try resumes inside it: the
// steps checkpointed before the interruption are restored, not executed.
func TestTryResumedInside(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	rc := interruptAndResume(t, h, `
name: try-resume
steps:
  - id: top
    rec: {label: top}
  - id: guarded
    try:
      steps:
        - id: one
          rec: {label: one}
        - id: set
          context_set: {x: "${{ steps.one.output.label + '!' }}"}
        - id: two
          rec: {label: "${{ variables.x }}"}
        - id: boom
          fail: {message: "${{ 'after ' + steps.two.output.label }}"}
      catch:
        - id: handle
          rec: {label: "${{ error.message }}"}
  - id: last
    context_set: {guarded: "${{ steps.guarded.output }}"}
output: "${{ variables }}"
`, nil, 3)
	rc.check(t)
	if !rc.checkpointed["|one"] || rc.checkpointed["|two"] {
		t.Fatalf("interrupted at the wrong place: %v", rc.checkpointed)
	}
	if want := `{"guarded":{"label":"after one!","scope":""},"x":"one!"}`; string(rc.interrupted.Output) != want {
		t.Fatalf("output %s, want %s", rc.interrupted.Output, want)
	}
}
