package engine

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/expr"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// recordingStore discards the runner's writes (the run the tests execute
// was never enqueued: there is no lease to fence), keeps the run's end and
// counts step completions: the engine's own cost, without a database's.
// Reads go to an empty nullstore.
type recordingStore struct {
	*nullstore.Store
	completes atomic.Int64
	mu        sync.Mutex
	nodeErrs  []*state.NodeErrorParams
	runErr    *state.RunErrorParams
	output    []byte
}

func (s *recordingStore) OnNodeStart(context.Context, *state.NodeStartParams) error     { return nil }
func (s *recordingStore) OnNodeRetry(context.Context, *state.NodeRetryParams) error     { return nil }
func (s *recordingStore) OnNodeSkipped(context.Context, *state.NodeSkippedParams) error { return nil }
func (s *recordingStore) RecordPhaseIfChanged(context.Context, *state.RecordPhaseParams) error {
	return nil
}

func (s *recordingStore) OnNodeComplete(context.Context, *state.NodeCompleteParams) error {
	s.completes.Add(1)
	return nil
}

func (s *recordingStore) OnNodeError(_ context.Context, p *state.NodeErrorParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodeErrs = append(s.nodeErrs, p)
	return nil
}

func (s *recordingStore) OnRunError(_ context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	s.mu.Lock()
	s.runErr = p
	s.mu.Unlock()
	return &starflowtype.Run{ID: p.RunID, Status: starflowtype.RunFailed, Error: p.Error}, nil
}

func (s *recordingStore) OnRunComplete(_ context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	s.mu.Lock()
	s.output = p.Output
	s.mu.Unlock()
	return &starflowtype.Run{ID: p.RunID, Status: starflowtype.RunSucceeded, Output: p.Output}, nil
}

// execute runs src (applied with no caps) once with input on a fresh engine
// over store.
func execute(t testing.TB, store state.Adapter, cfg Config, src, input string) Outcome {
	t.Helper()
	cfg.Store = store
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	def, err := workflow.Parse("t.yaml", []byte(src), workflow.ParseOptions{IsStepType: cfg.Registry.Has, Limits: workflow.NoLimits()})
	if err != nil {
		t.Fatal(err)
	}
	row := &starflowtype.Definition{ID: "def-1", Name: def.Name, Revision: def.Revision(), Spec: def.Canonical()}
	if _, err := e.Definition(row); err != nil { // cached: the store holds nothing
		t.Fatal(err)
	}
	run := &starflowtype.Run{ID: "run-1", DefinitionID: row.ID, WorkflowName: def.Name, Attempt: 1, MaxAttempts: 3,
		Input: []byte(input)}
	out, err := e.Execute(context.Background(), run, starflowtype.Lease{RunnerID: "r", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForEachItemsCap: a for_each whose items evaluate to more than
// Limits.ForEachItems fails its step before any item starts, with an error
// naming the cap and how to raise it, and the run fails without a retry.
func TestForEachItemsCap(t *testing.T) {
	t.Parallel()
	const src = `name: capped
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(input.n) }}"
      steps:
        - id: one
          context_set: {x: "${{ item }}"}
`
	store := &recordingStore{Store: nullstore.New()}
	out := execute(t, store, Config{Limits: workflow.Limits{ForEachItems: 100}}, src, `{"n": 101}`)
	if out != OutcomeFailed {
		t.Fatalf("outcome %s", out)
	}
	if n := store.completes.Load(); n != 0 {
		t.Fatalf("%d steps completed: items started", n)
	}
	want := "for_each ship: 101 items exceed the limit of 100 (limits.for_each_items; raise it with --max-for-each-items, STARFLOW_MAX_FOR_EACH_ITEMS or starflow.Config.Limits.ForEachItems)"
	if len(store.nodeErrs) != 1 || store.nodeErrs[0].StepID != "ship" || !strings.Contains(store.nodeErrs[0].Error, want) {
		t.Fatalf("step errors %+v, want one for ship containing %q", store.nodeErrs, want)
	}
	if store.runErr == nil || store.runErr.Retry {
		t.Fatalf("run error %+v: want a failure that is not retried", store.runErr)
	}

	ok := &recordingStore{Store: nullstore.New()}
	if out := execute(t, ok, Config{Limits: workflow.Limits{ForEachItems: 100}}, src, `{"n": 100}`); out != OutcomeSucceeded {
		t.Fatalf("at the cap: outcome %s", out)
	}
	if n := ok.completes.Load(); n != 101 {
		t.Fatalf("at the cap: %d completions, want 100 items and the loop", n)
	}
}

// TestForEachInFlightBounded: a for_each with a concurrency far above
// Limits.ForEachInFlight runs at most that many items at once, on as many
// goroutines; its output and merged context are those of every item, in
// item order.
func TestForEachInFlightBounded(t *testing.T) {
	t.Parallel()
	const n, inFlight = 3000, 50
	var active, peak atomic.Int64
	reg := NewRegistry()
	if err := reg.Register("hold", func(ctx context.Context, req *step.Request) (any, error) {
		a := active.Add(1)
		for {
			p := peak.Load()
			if a <= p || peak.CompareAndSwap(p, a) {
				break
			}
		}
		runtime.Gosched()
		active.Add(-1)
		return req.Input, nil
	}); err != nil {
		t.Fatal(err)
	}
	src := `name: wide
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(input.n) }}"
      concurrency: 1000000
      steps:
        - id: one
          hold: "${{ item * 2 }}"
        - id: last
          context_set: {last: "${{ item }}", k: 1}
output: "${{ {'items': steps.ship.output, 'last': variables.last} }}"
`
	store := &recordingStore{Store: nullstore.New()}
	out := execute(t, store, Config{Registry: reg, Limits: workflow.Limits{ForEachItems: -1, ForEachInFlight: inFlight}},
		src, `{"n": `+strconv.Itoa(n)+`}`)
	if out != OutcomeSucceeded {
		t.Fatalf("outcome %s: %+v", out, store.runErr)
	}
	if p := peak.Load(); p > inFlight {
		t.Fatalf("%d items ran at once, over the bound of %d", p, inFlight)
	}
	got := string(store.output)
	if !strings.HasSuffix(got, `"last":`+strconv.Itoa(n-1)+`}`) {
		t.Fatalf("the merged context is not the last item's: …%s", got[max(0, len(got)-80):])
	}
	if !strings.HasPrefix(got, `{"items":[{"k":1,"last":0},{"k":1,"last":1},`) {
		t.Fatalf("output not in item order: %.120s", got)
	}
}

// TestForEachMemory measures a for_each of many cheap items (context_set)
// with a concurrency as large as its items (the caps lifted): the
// goroutines alive stay within Limits.ForEachInFlight, and the heap within
// what the items and their outputs need. STARFLOW_FOREACH_ITEMS sets the
// number of items (default 100,000; docs/benchmarks.md has 1,000,000).
func TestForEachMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures a large loop")
	}
	n := 100_000
	if v := os.Getenv("STARFLOW_FOREACH_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	src := `name: huge
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(input.n) }}"
      concurrency: ` + strconv.Itoa(n) + `
      steps:
        - id: one
          context_set: {x: "${{ item }}"}
`
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	baseG := runtime.NumGoroutine()
	var peakHeap, peakLive uint64
	var peakG int
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peakHeap = max(peakHeap, m.HeapInuse)
			metrics.Read(live)
			if live[0].Value.Kind() == metrics.KindUint64 {
				peakLive = max(peakLive, live[0].Value.Uint64())
			}
			peakG = max(peakG, runtime.NumGoroutine())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// lists.range(n) costs n: lift the expression limits for the items.
	env, err := expr.NewEnv(expr.Limits{Cost: uint64(2 * n), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	store := &recordingStore{Store: nullstore.New()}
	out := execute(t, store, Config{Expr: env, Limits: workflow.Limits{ForEachItems: -1}}, src, `{"n": `+strconv.Itoa(n)+`}`)
	close(stop)
	<-sampled
	if out != OutcomeSucceeded {
		t.Fatalf("outcome %s: %+v", out, store.runErr)
	}
	if c := store.completes.Load(); c != int64(n)+1 {
		t.Fatalf("%d completions, want %d", c, n+1)
	}
	heapMB := float64(peakHeap-min(peakHeap, base.HeapInuse)) / (1 << 20)
	t.Logf("%d items, concurrency %d: %s, peak live heap %.0f MiB, peak heap in use +%.0f MiB, peak goroutines +%d, peak RSS of the test process %s",
		n, n, time.Since(start).Round(time.Millisecond), float64(peakLive)/(1<<20), heapMB, peakG-baseG, peakRSS())
	// A worker per item in flight, and at most one more each while it
	// evaluates an expression (the evaluation's cancellation watcher).
	if g := peakG - baseG; g > 2*workflow.ForEachInFlightDefault+50 {
		t.Errorf("%d goroutines at once for %d items: not bounded by the in-flight limit %d", g, n, workflow.ForEachInFlightDefault)
	}
	// The items, their outputs and the loop's output hold a few hundred
	// bytes per item; anything per-item beyond that (a goroutine, a frame)
	// costs kilobytes.
	if perItem := heapMB * (1 << 20) / float64(n); perItem > 2048 {
		t.Errorf("%.0f bytes of heap per item", perItem)
	}
}

// peakRSS is the process's peak resident set size (Linux's VmHWM), or
// "unknown".
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// TestForEachBareItems: for_each.items is an expression by nature, as
// validation has it: bare CEL evaluates like a ${{ }} (it was rendered as
// a template, so `items: input.xs` validated and then failed at run time
// as "a string").
func TestForEachBareItems(t *testing.T) {
	t.Parallel()
	for _, items := range []string{`input.xs`, `"${{ input.xs }}"`, `"[1, 2].map(x, x * 10)"`} {
		store := &recordingStore{Store: nullstore.New()}
		src := "name: bare\nsteps:\n  - id: ship\n    for_each:\n      items: " + items + "\n      steps: [{id: x, context_set: {v: \"${{ item }}\"}}]\n"
		if out := execute(t, store, Config{}, src, `{"xs": [10, 20]}`); out != OutcomeSucceeded {
			t.Fatalf("items %s: %s %+v", items, out, store.runErr)
		}
		if got := string(store.output); got != `[{"v":10},{"v":20}]` {
			t.Fatalf("items %s: output %s", items, got)
		}
	}
}
