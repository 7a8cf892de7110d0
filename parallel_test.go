package starflow_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

func TestParallel(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	recordStep(t, h, nil)
	h.start()
	run := h.runToEnd(`
name: fan
steps:
  - id: fanout
    parallel:
      lanes:
        b:
          - id: b1
            context_set: {who: b, b: 1}
        a:
          - id: a1
            context_set: {who: a, a: 1}
          - id: a2
            record: {label: "${{ variables.who }}"}
        c:
          - id: c1
            context_set: {who: c, c: "${{ has(variables.a) }}"}
output: "${{ {'vars': variables, 'out': steps.fanout.output} }}"
`, nil)
	mustSucceed(t, run)
	want := fmt.Sprintf(`{"out":{"a":{"key":"%s/fanout.lane_a/a2","label":"a"},"b":{"b":1,"who":"b"},"c":{"c":false,"who":"c"}},`+
		`"vars":{"a":1,"b":1,"c":false,"who":"c"}}`, run.ID)
	if string(run.Output) != want {
		t.Fatalf("output\n got %s\nwant %s", run.Output, want)
	}
	rows := rowSet(h, run.ID)
	wantRows := []string{"-|fanout|parallel|succeeded", "fanout.lane_a|a1|context_set|succeeded", "fanout.lane_a|a2|record|succeeded",
		"fanout.lane_b|b1|context_set|succeeded", "fanout.lane_c|c1|context_set|succeeded"}
	if !reflect.DeepEqual(rows, wantRows) {
		t.Fatalf("ledger\n got %v\nwant %v", rows, wantRows)
	}
	if cp := checkpointOf(h, run.ID, "", "fanout"); cp == nil || string(cp.Context) != `{"a":1,"b":1,"c":false,"who":"c"}` {
		t.Fatalf("checkpoint of the parallel: %+v", cp)
	}
}

func stepRow(h *harness, runID, scope, id string) *starflowtype.Step {
	for _, s := range h.steps(runID) {
		if s.ScopePath == scope && s.StepID == id {
			return s
		}
	}
	return nil
}

// TestParallelFailFast: the first lane failure cancels the other lanes:
// their step in flight is recorded failed with the cancellation, their
// later steps skipped, and the step fails with the first failure.
func TestParallelFailFast(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	entered := make(chan struct{})
	var once sync.Once
	h.eng.RegisterStep("hold", func(ctx context.Context, _ *step.Request) (any, error) {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h.eng.RegisterStep("gate", func(ctx context.Context, _ *step.Request) (any, error) {
		<-entered
		return "open", nil
	})
	h.start()
	start := time.Now()
	run := h.runToEnd(`
name: fast
steps:
  - id: fan
    parallel:
      lanes:
        a:
          - id: gate1
            gate: {}
          - id: boom
            fail: {message: lane a broke}
        b:
          - id: wait
            hold: {}
            timeout: 1m
          - id: after_hold
            context_set: {x: 1}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "lane a: step boom: lane a broke") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("fail_fast took %s", d)
	}
	want := []string{"-|fan|parallel|failed", "fan.lane_a|boom|fail|failed", "fan.lane_a|gate1|gate|succeeded",
		"fan.lane_b|after_hold|context_set|skipped", "fan.lane_b|wait|hold|failed"}
	if got := rowSet(h, run.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
	if r := stepRow(h, run.ID, "fan.lane_b", "wait"); !strings.Contains(r.Error, "cancelled: lane a of parallel step fan failed (fail_fast)") {
		t.Fatalf("cancelled lane's step error %q", r.Error)
	}
}

// TestParallelWithoutFailFast: every lane runs to its end; the step fails
// with the first failure in lane-name order, not in time order.
func TestParallelWithoutFailFast(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	zFailed := make(chan struct{})
	h.eng.RegisterStep("zfail", func(context.Context, *step.Request) (any, error) {
		close(zFailed)
		return nil, step.Permanent(errors.New("z broke"))
	})
	h.eng.RegisterStep("afterz", func(ctx context.Context, req *step.Request) (any, error) {
		<-zFailed
		time.Sleep(30 * time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return "finished", nil
	})
	h.start()
	run := h.runToEnd(`
name: patient
steps:
  - id: fan
    parallel:
      fail_fast: false
      lanes:
        a:
          - id: wait_a
            afterz: {}
          - id: afail
            fail: {message: a broke}
        m:
          - id: slow
            afterz: {}
          - id: mnext
            context_set: {m: done}
        z:
          - id: zstep
            zfail: {}
`, nil)
	if run.Status != starflowtype.RunFailed || run.Attempt != 1 || !strings.Contains(run.Error, "lane a: step afail: a broke") {
		t.Fatalf("run %s attempt %d: %q", run.Status, run.Attempt, run.Error)
	}
	want := []string{"-|fan|parallel|failed", "fan.lane_a|afail|fail|failed", "fan.lane_a|wait_a|afterz|succeeded",
		"fan.lane_m|mnext|context_set|succeeded", "fan.lane_m|slow|afterz|succeeded", "fan.lane_z|zstep|zfail|failed"}
	if got := rowSet(h, run.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
}

// TestCancelInsideParallel: an operator's cancellation stops every lane at
// its next step boundary; no goroutine outlives the run (goleak).
func TestCancelInsideParallel(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	n := recordStep(t, h, nil)
	var wg sync.WaitGroup
	wg.Add(2)
	release := make(chan struct{})
	h.eng.RegisterStep("hold", func(ctx context.Context, _ *step.Request) (any, error) {
		wg.Done()
		<-release
		return "held", nil
	})
	h.start()
	d := h.apply(`
name: cancel-lanes
steps:
  - id: fan
    parallel:
      lanes:
        a:
          - id: ha
            hold: {}
          - id: ra
            record: {label: never}
        b:
          - id: hb
            hold: {}
          - id: rb
            record: {label: never}
`)
	ctx := context.Background()
	run, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := h.eng.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	final := wait(t, h.eng, run.ID)
	if final.Status != starflowtype.RunCancelled || n.Load() != 0 {
		t.Fatalf("after cancel: %s, record ran %d times", final.Status, n.Load())
	}
	want := []string{"-|fan|parallel|cancelled", "fan.lane_a|ha|hold|succeeded", "fan.lane_b|hb|hold|succeeded"}
	if got := rowSet(h, run.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
}
