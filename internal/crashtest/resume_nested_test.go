package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nestedRuns is how many runs TestSIGKILLResumeNested kills once each;
// nestedItems is the for_each's item count.
const (
	nestedRuns  = 20
	nestedItems = 50
	// nestedCalls is the service_calls of one run: 2 polls (repeat_until),
	// one charge per item (for_each), pack, bill_open, bill_close, mail
	// (parallel), reserve and compensate (try/catch).
	nestedCalls = 2 + nestedItems + 4 + 2
	// nestedSeed seeds the moments the runs are cut at.
	nestedSeed = 4
)

// nestedWorkflow is the fixture of issue 4's Acceptance: repeat_until
// (2 iterations) + for_each (concurrency 4) + parallel (3 lanes) +
// try/catch (the try fails after its reserve step when input.stock < 1,
// so catch compensates), every counted step a service_call to url, the
// output built from the constructs' outputs and the final variables.
func nestedWorkflow(url string) string {
	call := func(step, extra string) string {
		return fmt.Sprintf(`service_call: {method: POST, url: %q, headers: {%s: "${{ env.%s }}"}, body: {step: %s, delay_ms: 10%s}}`, url, workerHeader, workerEnv, step, extra)
	}
	return `name: nested
recovery_mode: resume
max_attempts: 5
defaults:
  timeout: 60s
  retry_policy: {max_attempts: 3, initial_interval: 100ms, backoff: 2.0, max_interval: 1s}
steps:
  - id: rounds
    repeat_until:
      max_iterations: 5
      until: "${{ variables.round >= 2 }}"
      steps:
        - id: bump
          context_set: {round: "${{ has(variables.round) ? variables.round + 1 : 1 }}"}
        - id: poll
          ` + call("poll", `, round: "${{ variables.round }}"`) + `
          output: "${{ {'round': variables.round, 'status': output.status} }}"
  - id: items
    for_each:
      items: "${{ input.items }}"
      as: item
      concurrency: 4
      steps:
        - id: charge
          ` + call("charge", `, item: "${{ item }}"`) + `
          output: "${{ output.status }}"
        - id: line
          context_set: {last_item: "${{ item }}"}
          output: "${{ {'item': item, 'square': double(item) * double(item), 'charged': steps.charge.output} }}"
  - id: fulfil
    parallel:
      lanes:
        pack:
          - id: pack
            ` + call("pack", "") + `
            output: "${{ {'packed': size(steps.items.output), 'status': output.status} }}"
        bill:
          - id: bill_open
            ` + call("bill_open", "") + `
            output: "${{ output.status }}"
          - id: bill_close
            ` + call("bill_close", "") + `
            output: "${{ {'open': steps.bill_open.output, 'last': variables.last_item, 'status': output.status} }}"
        mail:
          - id: mail
            ` + call("mail", `, to: "${{ input.customer }}"`) + `
            output: "${{ {'to': input.customer, 'status': output.status} }}"
  - id: guarded
    try:
      steps:
        - id: reserve
          ` + call("reserve", "") + `
          output: "${{ output.status }}"
        - id: stock
          when: "${{ input.stock < 1 }}"
          fail: {message: "${{ 'out of stock after reserve ' + string(steps.reserve.output) }}"}
        - id: reserved
          context_set: {reserved: true}
      catch:
        - id: compensate
          ` + call("compensate", "") + `
          output: "${{ {'failed': error.step_id, 'message': error.message, 'status': output.status} }}"
        - id: noted
          context_set: {reserved: false, problem: "${{ error.message }}"}
output:
  rounds: "${{ steps.rounds.output }}"
  items: "${{ steps.items.output }}"
  lanes: "${{ steps.fulfil.output }}"
  guarded: "${{ steps.guarded.output }}"
  vars: "${{ variables }}"
`
}

// nestedInput is every run's input.
func nestedInput() map[string]any {
	items := make([]any, nestedItems)
	for i := range items {
		items[i] = i
	}
	return map[string]any{"items": items, "stock": 0, "customer": "ada"}
}

// cutter sits in front of the side-effects service and cuts runs at
// chosen moments: a run with a threshold k has its requests held, before
// the service sees them, once k of its requests have been let through,
// until released; a worker executing only held runs can then be killed
// while each of its runs is mid-flight at its chosen point.
type cutter struct {
	svc    *sideEffects
	server *httptest.Server

	mu        sync.Mutex
	threshold map[string]int           // run → requests let through before it is held (0: never held)
	passed    map[string]int           // run → requests let through
	held      map[string]int           // run → requests waiting
	active    map[string]int           // run → requests being handled (waiting or at the service)
	gates     map[string]chan struct{} // run → closed by releaseRuns
}

func newCutter(t *testing.T, svc *sideEffects) *cutter {
	t.Helper()
	k := &cutter{svc: svc, threshold: map[string]int{}, passed: map[string]int{}, held: map[string]int{},
		active: map[string]int{}, gates: map[string]chan struct{}{}}
	k.server = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(func() {
		k.releaseAll()
		k.server.Close()
	})
	return k
}

func (k *cutter) URL() string { return k.server.URL + "/effects" }

func (k *cutter) serve(w http.ResponseWriter, r *http.Request) {
	run, _, _ := strings.Cut(r.Header.Get("Idempotency-Key"), "/")
	k.mu.Lock()
	k.active[run]++
	if th := k.threshold[run]; th > 0 && k.passed[run] >= th {
		gate := k.gates[run]
		if gate == nil {
			gate = make(chan struct{})
			k.gates[run] = gate
		}
		k.held[run]++
		k.mu.Unlock()
		<-gate
		k.mu.Lock()
		k.held[run]--
	}
	k.passed[run]++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.active[run]--
		k.mu.Unlock()
	}()
	k.svc.serve(w, r)
}

// arm makes run's requests wait once n have been let through.
func (k *cutter) arm(run string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.threshold[run] = n
}

// heldRuns are the runs with a request waiting.
func (k *cutter) heldRuns() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []string
	for id, n := range k.held {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// releaseRuns disarms runs and lets their waiting requests through.
func (k *cutter) releaseRuns(ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		k.threshold[id] = 0
		if g := k.gates[id]; g != nil {
			close(g)
			delete(k.gates, id)
		}
	}
}

func (k *cutter) releaseAll() {
	k.mu.Lock()
	ids := make([]string, 0, len(k.threshold))
	for id := range k.threshold {
		ids = append(ids, id)
	}
	k.mu.Unlock()
	k.releaseRuns(ids)
}

// idle reports whether no request of runs is being handled.
func (k *cutter) idle(ids []string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		if k.active[id] > 0 {
			return false
		}
	}
	return true
}

// runOutput reads a succeeded run's output, decoded.
func (c *cluster) runOutput(id string) any {
	c.t.Helper()
	var raw []byte
	if err := c.pool().QueryRow(context.Background(), `SELECT output_json FROM workflow_runs WHERE id = $1 AND status = 'succeeded'`, id).Scan(&raw); err != nil {
		c.t.Fatalf("output of run %s: %v", id, err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.t.Fatalf("output of run %s: %v", id, err)
	}
	return v
}

// leasedRuns lists the runs runner holds a lease on.
func (c *cluster) leasedRuns(runner string) []string {
	c.t.Helper()
	return c.runIDs(`SELECT id::text FROM workflow_runs WHERE leased_by = $1 AND claim_state IN ('claimed', 'running') ORDER BY id`, runner)
}

// TestSIGKILLResumeNested (issue 4, Acceptance): the nested fixture
// (repeat_until + for_each of 50 items at concurrency 4 + parallel of 3
// lanes + try/catch, recovery_mode resume). An uninterrupted run gives
// the expected output. Then 20 runs of the same input are executed by
// two workers (and a server sweeping every 500 ms); each run is cut at a
// seeded random point — after k of its 58 service calls, k between 5%
// and 90% — by holding its next requests at the service, and once every
// run of a worker is held there the worker is killed with SIGKILL (its
// held requests then reach the service, as a dead client's requests
// would) and a replacement worker started; the first worker is killed
// while the second holds its runs, the second while the replacement
// resumes the first's. The sweep re-queues the runs and they resume.
//
// Every run succeeds in attempt 2 (interrupted exactly once), with the
// uninterrupted run's output (decoded JSON). No step instance that had a
// checkpoint was executed again: every (run, scope, step) has at most
// one checkpoint over all attempts, every service_call instance has one,
// and every accepted request of an instance was decided before its
// checkpoint was written — so a key accepted twice is an instance cut
// off in flight (its first execution left no checkpoint). The lease
// order and the checkpoint/completion invariant hold for every attempt.
func TestSIGKILLResumeNested(t *testing.T) {
	start := time.Now()
	c := newCluster(t, 16)
	svc := newSideEffects(t, c)
	cut := newCutter(t, svc)
	c.apply("nested", nestedWorkflow(cut.URL()))
	ctx := context.Background()
	flags := append(slices.Clone(resumeWorkerFlags), "--concurrency", "10")

	// The uninterrupted run.
	w0 := c.startWorker("w0", flags...)
	base, err := c.engine.Enqueue(ctx, "nested", nestedInput(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllSucceeded(1, 60*time.Second)
	want := c.runOutput(base.ID)
	w0.signal(t, syscall.SIGTERM)
	if code := w0.waitExit(t, 60*time.Second); code != 0 {
		t.Fatalf("w0 exited with status %d after SIGTERM", code)
	}
	if n := c.count(`SELECT count(DISTINCT idempotency_key) FROM side_effects WHERE run_id = $1 AND accepted`, base.ID); n != nestedCalls {
		t.Fatalf("the uninterrupted run made %d distinct service calls, want %d", n, nestedCalls)
	}
	baseline := time.Since(start)

	// 20 runs, each armed to be held after a seeded number of calls.
	rng := rand.New(rand.NewPCG(nestedSeed, nestedSeed))
	lo, hi := (nestedCalls*5+99)/100, nestedCalls*90/100
	ids := make([]string, nestedRuns)
	cutAt := map[string]int{}
	for i := range ids {
		run, err := c.engine.Enqueue(ctx, "nested", nestedInput(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = run.ID
		cutAt[run.ID] = lo + rng.IntN(hi-lo+1)
		cut.arm(run.ID, cutAt[run.ID])
	}
	c.startSweeper()
	w1 := c.startWorker("w1", flags...)
	w2 := c.startWorker("w2", flags...)
	waitFor(t, 60*time.Second, "every run to be held at its cut point", func() bool {
		return len(cut.heldRuns()) == nestedRuns
	})
	runs1, runs2 := c.leasedRuns(w1.runnerID), c.leasedRuns(w2.runnerID)
	if len(runs1)+len(runs2) != nestedRuns {
		t.Fatalf("w1 holds %d runs and w2 %d; want all %d held by them", len(runs1), len(runs2), nestedRuns)
	}

	// Kill w1 and let its cut-off requests reach the service; a
	// replacement takes its runs over once the sweep re-queued them.
	kill := func(w *process, runs []string) {
		w.kill(t)
		cut.releaseRuns(runs)
		waitFor(t, 30*time.Second, "the killed worker's requests to be decided", func() bool { return cut.idle(runs) })
	}
	kill(w1, runs1)
	c.startWorker("w3", flags...)
	waitFor(t, 60*time.Second, "w1's runs to be resumed", func() bool {
		return len(runs1) == 0 || c.count(`SELECT count(*) FROM workflow_runs WHERE id = ANY ($1) AND attempt = 2 AND leased_by IS NOT NULL`, runs1) > 0
	})
	// Kill w2 while w3 resumes w1's runs.
	kill(w2, runs2)
	c.startWorker("w4", flags...)

	c.waitAllSucceeded(nestedRuns+1, 90*time.Second)

	// Outputs, attempts.
	all := c.runs()
	for _, id := range ids {
		r := all[id]
		if r.status != "succeeded" || r.attempt != 2 {
			t.Errorf("run %s (cut after %d calls) ended %s in attempt %d; want succeeded in attempt 2", id, cutAt[id], r.status, r.attempt)
			continue
		}
		if got := c.runOutput(id); !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("run %s (cut after %d calls): output\n%s\nwant (uninterrupted)\n%s", id, cutAt[id], g, w)
		}
	}
	c.checkCheckpointsMatchCompletions()
	hist := c.checkLeaseOrder(all, c.events())
	for _, id := range ids {
		if n := len(hist[id].leases); n != 2 {
			t.Errorf("run %s claimed %d times (%v), want 2", id, n, hist[id].holders())
		}
	}

	// No step instance executed again once it had a checkpoint.
	effects := svc.checkFencing()
	perKey := acceptedPerKey(effects)
	twice := 0
	perRun := map[string]int{}
	for key, n := range perKey {
		run, _, _ := strings.Cut(key, "/")
		perRun[run]++
		if n > 2 {
			t.Errorf("%s executed %d times", key, n)
		}
		if n == 2 {
			twice++
		}
	}
	for _, id := range append([]string{base.ID}, ids...) {
		if perRun[id] != nestedCalls {
			t.Errorf("run %s: %d distinct service calls accepted, want %d", id, perRun[id], nestedCalls)
		}
	}
	if n := c.count(`SELECT count(*) FROM (SELECT 1 FROM workflow_run_checkpoints GROUP BY run_id, scope_path, step_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d step instances have checkpoints in more than one attempt", n)
		c.logQuery(`SELECT run_id::text || ' ' || scope_path || ' ' || step_id || ' attempts ' || string_agg(attempt::text, ',')
		              FROM workflow_run_checkpoints GROUP BY run_id, scope_path, step_id HAVING count(*) > 1 LIMIT 20`)
	}
	if n := c.count(`SELECT count(DISTINCT s.idempotency_key) FROM side_effects s
	                  WHERE NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints k WHERE k.run_id = s.run_id
	                                       AND s.idempotency_key = k.run_id::text || '/' || k.scope_path || '/' || k.step_id)`); n != 0 {
		t.Errorf("%d service_call instances have no checkpoint", n)
	}
	const late = `FROM side_effects s JOIN workflow_run_checkpoints k
	                ON k.run_id = s.run_id AND s.idempotency_key = k.run_id::text || '/' || k.scope_path || '/' || k.step_id
	             WHERE s.accepted AND s.at >= k.created_at`
	if n := c.count(`SELECT count(*) ` + late); n != 0 {
		t.Errorf("%d executions of step instances were accepted after the instance had a checkpoint", n)
		c.logQuery(`SELECT s.idempotency_key || ' seq ' || s.seq || ' epoch ' || s.epoch || ' by ' || s.worker || ' at ' || s.at || '; checkpoint of attempt ' || k.attempt || ' at ' || k.created_at ` + late + ` LIMIT 20`)
	}
	// A key executed twice: first by the killed worker in attempt 1 (no
	// checkpoint there), then in attempt 2.
	if n := c.count(`SELECT count(*) FROM (SELECT s.idempotency_key FROM side_effects s WHERE s.accepted
	                  GROUP BY 1 HAVING count(*) > 1 AND NOT bool_or(s.worker IN ('w1', 'w2'))) d`); n != 0 {
		t.Errorf("%d keys executed twice without an execution by a killed worker", n)
	}
	c.stopGracefully()
	t.Logf("seed %d, cut points %v; w1 held %d runs, w2 %d; %d side effects (%d refused), %d instances cut in flight and executed again; baseline %s; total %s",
		nestedSeed, cutsOf(ids, cutAt), len(runs1), len(runs2), len(effects), refused(effects), twice,
		baseline.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func cutsOf(ids []string, at map[string]int) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = at[id]
	}
	return out
}

// logQuery logs the text rows of a diagnostic query.
func (c *cluster) logQuery(sql string) {
	rows, err := c.pool().Query(context.Background(), sql)
	if err != nil {
		c.t.Log(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil {
			c.t.Log(s)
		}
	}
}
