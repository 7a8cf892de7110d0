package crashtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// leaderWorkerFlags: short leases, intervals and leader TTL, so that the
// handovers of these tests take seconds; every worker campaigns for the
// maintenance leadership and serves /metrics on a free port.
var leaderWorkerFlags = []string{"--maintenance", "--leader-ttl", "2s", "--lease-ttl", "2s", "--heartbeat", "500ms",
	"--poll-interval", "100ms", "--sweep-interval", "500ms", "--timer-interval", "200ms", "--addr", "127.0.0.1:0"}

// takeoverBound is the longest a surviving worker may take to become the
// maintenance leader after the leader was SIGKILLed: the leader TTL (2 s:
// SQLite's lease row expires; PostgreSQL frees the lock at once) plus a
// retry interval, with room for a loaded machine.
const takeoverBound = 10 * time.Second

// workersOnly is a deployment of `starflow worker` processes only (no
// server, no dev) on PostgreSQL or SQLite.
type workersOnly struct {
	t       *testing.T
	start   func(name string) *process
	apply   func(name, yaml string)
	enqueue func(workflow string, input any) string
	count   func(query string) int
}

func pgWorkersOnly(t *testing.T) *workersOnly {
	c := newCluster(t, 8)
	return &workersOnly{t: t,
		start: func(name string) *process { return c.startWorker(name, leaderWorkerFlags...) },
		apply: c.apply,
		enqueue: func(workflow string, input any) string {
			run, err := c.engine.Enqueue(context.Background(), workflow, input, nil)
			if err != nil {
				t.Fatal(err)
			}
			return run.ID
		},
		count: func(query string) int { return c.count(query) },
	}
}

func liteWorkersOnly(t *testing.T) *workersOnly {
	d := newLiteDeploy(t)
	return &workersOnly{t: t,
		start:   func(string) *process { return d.startProc("worker", nil, leaderWorkerFlags...) },
		apply:   d.apply,
		enqueue: d.enqueue,
		count:   func(query string) int { return d.count(query) },
	}
}

var listeningLine = regexp.MustCompile(`listening on (http://\S+)`)

// metricsURL is the /metrics URL of a process started with --addr.
func metricsURL(t *testing.T, p *process) string {
	t.Helper()
	m := listeningLine.FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("%s printed no listener:\n%s", p.name, p.log.String())
	}
	return m[1] + "/metrics"
}

// leaderGauge reads starflow_maintenance_leader from a process's /metrics:
// 1, 0, or -1 when it does not answer (a killed process).
func leaderGauge(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	switch {
	case strings.Contains(string(body), "\nstarflow_maintenance_leader 1\n"):
		return 1
	case strings.Contains(string(body), "\nstarflow_maintenance_leader 0\n"):
		return 0
	}
	return -1
}

// leaderWatch samples the leader gauge of every process it watches until
// stopped, and records every moment at which two of them led at once: a
// process that said 1 in two reads bracketing another's 1 (reads of
// different processes are not simultaneous, so one 1 beside another
// could be a handover between the reads).
type leaderWatch struct {
	mu         sync.Mutex
	urls       map[string]string
	violations []string
	samples    atomic.Int64
	stop       chan struct{}
	done       chan struct{}
}

func watchLeaders() *leaderWatch {
	w := &leaderWatch{urls: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *leaderWatch) add(name, url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.urls[name] = url
}

func (w *leaderWatch) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		w.mu.Lock()
		urls := make(map[string]string, len(w.urls))
		for k, v := range w.urls {
			urls[k] = v
		}
		w.mu.Unlock()
		for a, ua := range urls {
			if leaderGauge(ua) != 1 {
				continue
			}
			for b, ub := range urls {
				if b != a && leaderGauge(ub) == 1 && leaderGauge(ua) == 1 {
					w.mu.Lock()
					w.violations = append(w.violations, fmt.Sprintf("%s and %s both led at %s", a, b, time.Now().Format(time.RFC3339Nano)))
					w.mu.Unlock()
				}
			}
		}
		w.samples.Add(1)
	}
}

func (w *leaderWatch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Errorf("two maintenance leaders at once (%d samples): %v", w.samples.Load(), w.violations)
	}
	if w.samples.Load() < 10 {
		t.Errorf("only %d samples of the leader gauges", w.samples.Load())
	}
}

// holdingService answers POST /work: the first request hangs until its
// client goes away (the worker holding the run is killed), later ones
// answer 200 at once.
type holdingService struct {
	srv   *httptest.Server
	calls atomic.Int32
	first chan struct{}
}

func newHoldingService(t *testing.T) *holdingService {
	h := &holdingService{first: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Add(1) == 1 {
			close(h.first)
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(func() {
		h.srv.CloseClientConnections()
		h.srv.Close()
	})
	return h
}

const leaderTimerWorkflow = `name: timer
steps:
  - id: sleep
    wait: {until: "${{ input.wake_at }}"}
  - id: after
    context_set: {woke: true}
`

// TestWorkersOnlyMaintenance (issue 10 item 16) on PostgreSQL and SQLite:
// a deployment of two `starflow worker` processes and nothing else. The
// first worker leads maintenance and holds a run stuck in a service
// call; a timer run fires with only the workers running; the leader —
// holding the run — is SIGKILLed; the other worker becomes the leader
// within a bound, sweeps the dead worker's run and completes it, and
// fires another timer alone. The leader gauges of both workers are
// sampled throughout: never two leaders at once; each leadership change
// is printed.
func TestWorkersOnlyMaintenance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func(*testing.T) *workersOnly
	}{{"postgres", pgWorkersOnly}, {"sqlite", liteWorkersOnly}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			workersOnlyMaintenance(t, c.open(t))
		})
	}
}

func workersOnlyMaintenance(t *testing.T, d *workersOnly) {
	svc := newHoldingService(t)
	d.apply("hold", fmt.Sprintf(`name: hold
steps:
  - id: call
    service_call: {method: POST, url: %q, expect_status: [200]}
    timeout: 60s
    retry_policy: {max_attempts: 1}
  - id: done
    context_set: {ok: true}
`, svc.srv.URL+"/work"))
	d.apply("timer", leaderTimerWorkflow)
	succeeded := func(id string) func() bool {
		return func() bool {
			if d.count(`SELECT count(*) FROM workflow_runs WHERE id = '`+id+`' AND status IN ('failed', 'cancelled')`) > 0 {
				t.Fatalf("run %s failed", id)
			}
			return d.count(`SELECT count(*) FROM workflow_runs WHERE id = '`+id+`' AND status = 'succeeded'`) == 1
		}
	}

	a := d.start("a")
	aURL := metricsURL(t, a)
	waitFor(t, 30*time.Second, "worker a to lead maintenance", func() bool { return leaderGauge(aURL) == 1 })
	if !strings.Contains(a.log.String(), "worker "+a.runnerID+" is the maintenance leader") {
		t.Fatalf("worker a printed no leadership line:\n%s", a.log.String())
	}
	watch := watchLeaders()
	watch.add("a", aURL)

	// a is the only worker: it claims the run and hangs in its call.
	hold := d.enqueue("hold", nil)
	select {
	case <-svc.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the held run's service call never arrived")
	}
	if n := d.count(`SELECT count(*) FROM workflow_runs WHERE id = '` + hold + `' AND leased_by = '` + a.runnerID + `'`); n != 1 {
		t.Fatalf("the held run is not leased by worker a (%s)", a.runnerID)
	}

	b := d.start("b")
	bURL := metricsURL(t, b)
	watch.add("b", bURL)

	// A timer with only workers running.
	t1 := d.enqueue("timer", map[string]any{"wake_at": time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)})
	waitFor(t, 30*time.Second, "the first timer run to succeed", succeeded(t1))
	if g := leaderGauge(bURL); g != 0 {
		t.Fatalf("worker b's leader gauge is %d while a leads", g)
	}

	// Kill the leader, which holds the run.
	a.kill(t)
	killed := time.Now()
	waitFor(t, 2*takeoverBound, "worker b to lead maintenance", func() bool { return leaderGauge(bURL) == 1 })
	took := time.Since(killed)
	t.Logf("worker b led maintenance %s after worker a was killed", took.Round(time.Millisecond))
	if took > takeoverBound {
		t.Errorf("worker b became the maintenance leader %s after the leader was killed, want under %s", took, takeoverBound)
	}
	if !strings.Contains(b.log.String(), "worker "+b.runnerID+" is the maintenance leader") {
		t.Errorf("worker b printed no leadership line:\n%s", b.log.String())
	}

	// b sweeps the dead worker's run and completes it.
	waitFor(t, 60*time.Second, "the dead worker's run to be swept and completed", succeeded(hold))
	if n := d.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = '` + hold + `' AND event_type = 'runner_lost'`); n != 1 {
		t.Errorf("%d runner_lost events for the held run, want 1 (the sweep of worker b)", n)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("the service was called %d times, want 2 (the killed try and the retry)", n)
	}

	// A timer with one worker left.
	t2 := d.enqueue("timer", map[string]any{"wake_at": time.Now().Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	waitFor(t, 30*time.Second, "the second timer run to succeed", succeeded(t2))

	watch.finish(t)
	b.signal(t, syscall.SIGTERM)
	if code := b.waitExit(t, 60*time.Second); code != 0 {
		t.Errorf("worker b exited %d after SIGTERM", code)
	}
	if !strings.Contains(b.log.String(), "worker "+b.runnerID+" is no longer the maintenance leader") {
		t.Errorf("worker b did not say it gave the leadership up:\n%s", b.log.String())
	}
	if n := strings.Count(a.log.String()+b.log.String(), "is the maintenance leader"); n != 2 {
		t.Errorf("%d leadership gains printed, want 2 (a, then b)", n)
	}
}
