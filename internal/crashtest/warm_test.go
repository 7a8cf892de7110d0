package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/natskv"
)

// The warm tier's acceptance tests (issue 6): real `starflow server` and
// `starflow worker` processes on PostgreSQL with a nats-server subprocess
// each test owns, stopped (SIGKILL) and restarted under load.

// warmFlags are the short warm-tier tunables of these tests' processes
// (server: the listener's thresholds; worker: its presence interval).
func warmFlags(natsURL string, role string) []string {
	f := []string{"--warm", natsURL, "--warm-health-warn", "300ms", "--warm-health-critical", "2s", "--drain-poll", "50ms"}
	if role == "server" {
		return append(f, "--warm-sweep-interval", "1s")
	}
	return append(f, "--presence-interval", "500ms")
}

// startWarmServer starts `starflow server` with the warm tier on natsURL
// and a listener on a free port; it returns the process and the
// listener's base URL.
func (c *cluster) startWarmServer(natsURL string, extra ...string) (*process, string) {
	c.t.Helper()
	args := append([]string{"server", "--store", c.storeURL, "--sweep-interval", "1s", "--addr", "127.0.0.1:0"}, warmFlags(natsURL, "server")...)
	p := c.start("server", nil, append(args, extra...)...)
	p.waitStarted(c.t, "server")
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		c.t.Fatalf("server did not print its listener:\n%s", p.log.String())
	}
	return p, m[1]
}

// health is the part of GET /healthz these tests read.
type health struct {
	Warm          string  `json:"warm"`
	OutboxPending int64   `json:"outbox_pending"`
	OldestAge     float64 `json:"outbox_oldest_age_seconds"`
	WarmReachable bool    `json:"warm_reachable"`
	StoreOK       bool    `json:"store_ok"`
}

func getHealth(t *testing.T, base string) health {
	t.Helper()
	res, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer res.Body.Close()
	var h health
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	if res.StatusCode != 200 || !h.StoreOK {
		t.Fatalf("GET /healthz: %d %+v", res.StatusCode, h)
	}
	return h
}

// metric reads the sum of a metric's samples (all label values) from
// GET /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	sum, found := 0.0, false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		t.Fatalf("/metrics has no %s:\n%s", name, body)
	}
	return sum
}

// openWarm connects the test to the NATS warm store (closed at cleanup).
func openWarm(t *testing.T, natsURL string) *natskv.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := natskv.Open(ctx, natsURL, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// coldRun is what a warm entry must match.
type coldRun struct {
	status, phase string
	version       int64
}

func (c *cluster) coldRuns() map[string]coldRun {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(), `SELECT id::text, status, coalesce(phase, ''), mirror_version FROM workflow_runs`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]coldRun{}
	for rows.Next() {
		var id string
		var r coldRun
		if err := rows.Scan(&id, &r.status, &r.phase, &r.version); err != nil {
			c.t.Fatal(err)
		}
		out[id] = r
	}
	return out
}

// warmMismatches lists the runs whose warm entry does not match cold
// (status, phase, version), or is missing.
func warmMismatches(t *testing.T, ws warm.Store, cold map[string]coldRun) []string {
	t.Helper()
	var bad []string
	for id, cr := range cold {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e, err := ws.GetRun(ctx, id)
		cancel()
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", id, err))
		case e.Status != cr.status || e.Phase != cr.phase || e.Version != cr.version:
			bad = append(bad, fmt.Sprintf("%s: warm %s/%q/v%d, cold %s/%q/v%d", id, e.Status, e.Phase, e.Version, cr.status, cr.phase, cr.version))
		}
	}
	return bad
}

// warmCLI runs a starflow command against the cluster's store, with
// STARFLOW_WARM set to natsURL (so a command that consulted the warm tier
// would see it), and returns its stdout.
func (c *cluster) warmCLI(natsURL string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(binary, append(args, "--store", c.storeURL)...)
	cmd.Env = append(cmd.Environ(), "STARFLOW_WARM="+natsURL)
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("starflow %v: %v", args, err)
	}
	return string(out)
}

// coldAnswers is what run detail, the ledger and events print for runs,
// and, with history, the runs list.
func (c *cluster) coldAnswers(natsURL string, ids []string, history bool) string {
	var b strings.Builder
	for _, id := range ids {
		for _, cmd := range [][]string{{"runs", "show", id}, {"runs", "show", id, "--json"}, {"runs", "ledger", id}, {"runs", "events", id, "--json"}} {
			b.WriteString(c.warmCLI(natsURL, cmd...))
		}
	}
	if history {
		b.WriteString(c.warmCLI(natsURL, "runs", "list", "--json", "--limit", "500"))
	}
	return b.String()
}

// TestWarmNATSOutage (issue 6, Acceptance): NATS is stopped while 100 runs
// execute. Every run succeeds; the outbox depth grows; /healthz turns
// warning, then critical; run detail, ledger, events and history answer
// byte for byte as before the outage. NATS restarted: the outbox drains to
// zero, /healthz is ok again, and every warm entry matches cold (status,
// phase, version).
func TestWarmNATSOutage(t *testing.T) {
	const runs, steps = 100, 5
	c := newCluster(t, 16)
	n := startNATS(t)
	svc := newSideEffects(t, c)
	c.apply("sidefx", sideEffectWorkflow("sidefx", svc.URL(), steps, nil))
	_, base := c.startWarmServer(n.URL())
	c.startWorker("w1", append(crashWorkerFlags, warmFlags(n.URL(), "worker")...)...)
	c.startWorker("w2", append(crashWorkerFlags, warmFlags(n.URL(), "worker")...)...)

	// A run finished before the outage: its cold answers must not change.
	first := c.enqueue("sidefx", 1)
	waitFor(t, 60*time.Second, "the first run to succeed and drain", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) == 1 && getHealth(t, base).OutboxPending == 0
	})
	before := c.coldAnswers(n.URL(), first, false)

	c.enqueue("sidefx", runs-1)
	waitFor(t, 60*time.Second, "runs under way", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) >= 10
	})
	n.stop()
	t.Logf("NATS stopped with %d runs succeeded", c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`))

	var sawWarning, sawCritical bool
	var depths []int64
	waitFor(t, 150*time.Second, "every run to succeed and /healthz to say critical", func() bool {
		h := getHealth(t, base)
		depths = append(depths, h.OutboxPending)
		switch h.Warm {
		case "warning":
			if sawCritical {
				t.Fatalf("/healthz went back to warning after critical during the outage: %+v", h)
			}
			sawWarning = true
		case "critical":
			sawCritical = true
		case "ok":
			if sawWarning || sawCritical {
				t.Fatalf("/healthz back to ok during the outage: %+v", h)
			}
		}
		if bad := c.count(`SELECT count(*) FROM workflow_runs WHERE status IN ('failed', 'cancelled')`); bad > 0 {
			t.Fatalf("%d runs failed during the outage: %s", bad, c.statusCounts())
		}
		return sawCritical && c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) == runs
	})
	if !sawWarning {
		t.Fatalf("/healthz never said warning before critical (depths %v)", depths)
	}
	if depths[len(depths)-1] <= depths[0] || depths[len(depths)-1] < runs {
		t.Fatalf("outbox depth did not grow during the outage: %v", depths)
	}
	if got := c.count(`SELECT count(*) FROM mirror_outbox WHERE applied_at IS NULL`); int64(got) != getHealth(t, base).OutboxPending {
		t.Fatalf("/healthz outbox_pending differs from the table's %d unapplied rows", got)
	}
	if m := metric(t, base, "starflow_outbox_pending"); m < runs {
		t.Fatalf("starflow_outbox_pending = %v during the outage", m)
	}
	if m := metric(t, base, "starflow_outbox_oldest_age_seconds"); m < 2 {
		t.Fatalf("starflow_outbox_oldest_age_seconds = %v past the critical threshold", m)
	}
	if after := c.coldAnswers(n.URL(), first, false); after != before {
		t.Fatalf("cold answers of the first run changed during the outage:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The live view reads the warm tier only: it fails while NATS is down.
	live := exec.Command(binary, "runs", "live", first[0], "--warm", n.URL())
	if out, err := live.CombinedOutput(); err == nil {
		t.Fatalf("runs live with NATS down succeeded:\n%s", out)
	}
	// Detail, ledger and events of every tenth run, and the whole history.
	var all []string
	for i, id := range c.runIDs(`SELECT id::text FROM workflow_runs ORDER BY id`) {
		if i%10 == 0 {
			all = append(all, id)
		}
	}
	during := c.coldAnswers(n.URL(), all, true)
	t.Logf("outbox depth during the outage: first %d, last %d (%d samples)", depths[0], depths[len(depths)-1], len(depths))

	n.restart()
	waitFor(t, 120*time.Second, "the outbox to drain and /healthz to say ok", func() bool {
		h := getHealth(t, base)
		return h.OutboxPending == 0 && h.Warm == "ok" && h.WarmReachable
	})
	if got := c.count(`SELECT count(*) FROM mirror_outbox WHERE applied_at IS NULL`); got != 0 {
		t.Fatalf("%d unapplied outbox rows after the drain", got)
	}
	if after := c.coldAnswers(n.URL(), all, true); after != during {
		t.Fatal("cold answers (detail, ledger, events of every tenth run; the history) changed once NATS was back and the outbox drained")
	}
	ws := openWarm(t, n.URL())
	cold := c.coldRuns()
	if len(cold) != runs {
		t.Fatalf("%d runs in cold", len(cold))
	}
	if bad := warmMismatches(t, ws, cold); len(bad) > 0 {
		t.Fatalf("%d warm entries do not match cold after the drain:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	var lv struct {
		Run struct {
			Status  string `json:"status"`
			Version int64  `json:"version"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(c.warmCLI(n.URL(), "runs", "live", first[0], "--json")), &lv); err != nil {
		t.Fatal(err)
	}
	if lv.Run.Status != "succeeded" || lv.Run.Version != cold[first[0]].version {
		t.Fatalf("runs live: %+v, cold %+v", lv.Run, cold[first[0]])
	}
	c.stopGracefully()
}

// TestWarmSweepCorrects (issue 6, Acceptance): a warm entry corrupted and
// another deleted by hand (written straight to NATS KV) are corrected by
// the hash sweep (every second here) within a few intervals;
// starflow_warm_corrections_total counts both; run detail, ledger, events
// and history answer byte for byte as before.
func TestWarmSweepCorrects(t *testing.T) {
	const runs = 10
	c := newCluster(t, 16)
	n := startNATS(t)
	svc := newSideEffects(t, c)
	c.apply("sidefx", sideEffectWorkflow("sidefx", svc.URL(), 3, nil))
	_, base := c.startWarmServer(n.URL())
	c.startWorker("w1", append(crashWorkerFlags, warmFlags(n.URL(), "worker")...)...)
	ids := c.enqueue("sidefx", runs)
	c.waitAllSucceeded(runs, 120*time.Second)
	ws := openWarm(t, n.URL())
	waitFor(t, 60*time.Second, "every warm entry to match cold", func() bool {
		return getHealth(t, base).OutboxPending == 0 && len(warmMismatches(t, ws, c.coldRuns())) == 0
	})
	before := c.coldAnswers(n.URL(), ids, true)
	corrections := metric(t, base, "starflow_warm_corrections_total")

	ctx := context.Background()
	good, err := ws.GetRun(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	bad := *good
	bad.Status, bad.Phase, bad.Version = "failed", "corrupted by hand", good.Version+1000
	if _, err := ws.PutRun(ctx, &bad, true); err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteRun(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	// The sweep (every second) may already have corrected one of them:
	// only the two corrupted entries may differ now, and the corrections
	// counter below proves that both were corrupted and corrected.
	for _, m := range warmMismatches(t, ws, c.coldRuns()) {
		if !strings.HasPrefix(m, ids[0]+":") && !strings.HasPrefix(m, ids[1]+":") {
			t.Fatalf("an entry not corrupted by hand differs: %s", m)
		}
	}
	corrupted := time.Now()
	waitFor(t, 30*time.Second, "the sweep to correct both entries", func() bool {
		return len(warmMismatches(t, ws, c.coldRuns())) == 0
	})
	t.Logf("corrected %s after the corruption (sweep interval 1s)", time.Since(corrupted).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "starflow_warm_corrections_total to count both", func() bool {
		return metric(t, base, "starflow_warm_corrections_total") >= corrections+2
	})
	if after := c.coldAnswers(n.URL(), ids, true); after != before {
		t.Fatalf("cold answers changed with the warm tier corrupted:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	c.stopGracefully()
}

// outboxGaps checks that mirror_outbox holds a row for every committed
// mirrored write: per run, `run` rows with every version 1..mirror_version
// (the version is bumped in the write's transaction), the newest carrying
// the run's cold status; per step row, a `step` row with its final status.
// It returns what is missing.
func (c *cluster) outboxGaps() []string {
	c.t.Helper()
	var gaps []string
	for _, q := range []struct{ what, sql string }{
		{"runs whose run rows are not exactly versions 1..mirror_version", `
			SELECT count(*) FROM workflow_runs r
			WHERE r.mirror_version <> (SELECT count(DISTINCT o.version) FROM mirror_outbox o WHERE o.kind = 'run' AND o.run_id = r.id::text)
			   OR r.mirror_version <> (SELECT coalesce(max(o.version), 0) FROM mirror_outbox o WHERE o.kind = 'run' AND o.run_id = r.id::text)`},
		{"runs whose newest run row does not carry the cold status", `
			SELECT count(*) FROM workflow_runs r
			WHERE r.mirror_version > 0 AND NOT EXISTS (
			    SELECT 1 FROM mirror_outbox o WHERE o.kind = 'run' AND o.run_id = r.id::text
			    AND o.version = r.mirror_version AND o.payload->>'status' = r.status)`},
		{"step rows without a step outbox row of their status", `
			SELECT count(*) FROM workflow_steps s
			WHERE NOT EXISTS (
			    SELECT 1 FROM mirror_outbox o WHERE o.kind = 'step' AND o.run_id = s.run_id::text
			    AND (o.payload->>'attempt')::int = s.attempt AND o.payload->>'scope_path' = s.scope_path
			    AND o.payload->>'step_id' = s.step_id AND o.payload->>'status' = s.status)`},
	} {
		if n := c.count(q.sql); n > 0 {
			gaps = append(gaps, fmt.Sprintf("%d %s", n, q.what))
		}
	}
	return gaps
}

// TestWarmSIGKILLKeepsOutbox (issue 6, Acceptance): a worker whose warm
// store (NATS) is down executes runs, so every cold write's outbox row
// waits undrained; the worker is killed with SIGKILL mid-run. Every
// committed write still has its outbox row (they share its transaction),
// none applied. With NATS back, a server (drainer, lease sweep) and a new
// worker finish the runs, the outbox drains to zero and every warm entry
// matches cold.
func TestWarmSIGKILLKeepsOutbox(t *testing.T) {
	const runs, steps = 40, 5
	c := newCluster(t, 16)
	n := startNATS(t)
	n.stop() // the warm store is down from the start
	svc := newSideEffects(t, c)
	c.apply("sidefx", sideEffectWorkflow("sidefx", svc.URL(), steps, nil))
	c.enqueue("sidefx", runs)
	w1 := c.startWorker("w1", append(crashWorkerFlags, warmFlags(n.URL(), "worker")...)...)
	waitFor(t, 120*time.Second, "runs to succeed while w1 holds leases", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) >= 10 && c.leasedBy(w1.runnerID) > 0
	})
	w1.kill(t)
	held := c.leasedBy(w1.runnerID)
	succeeded := c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`)
	rows := c.count(`SELECT count(*) FROM mirror_outbox`)
	t.Logf("killed w1 holding %d runs; %d succeeded; %d outbox rows", held, succeeded, rows)
	if applied := c.count(`SELECT count(*) FROM mirror_outbox WHERE applied_at IS NOT NULL`); applied != 0 || rows == 0 {
		t.Fatalf("with the warm store down: %d rows, %d applied", rows, applied)
	}
	if gaps := c.outboxGaps(); len(gaps) > 0 {
		t.Fatalf("outbox rows lost by the SIGKILL: %s", strings.Join(gaps, "; "))
	}
	if c.count(`SELECT count(*) FROM workflow_steps`) < succeeded*steps {
		t.Fatal("fewer step rows than the succeeded runs' steps")
	}

	n.restart()
	_, base := c.startWarmServer(n.URL())
	c.startWorker("w2", append(crashWorkerFlags, warmFlags(n.URL(), "worker")...)...)
	c.waitAllSucceeded(runs, 150*time.Second)
	waitFor(t, 60*time.Second, "the outbox to drain to zero", func() bool {
		h := getHealth(t, base)
		return h.OutboxPending == 0 && h.Warm == "ok"
	})
	if got := c.count(`SELECT count(*) FROM mirror_outbox WHERE applied_at IS NULL`); got != 0 {
		t.Fatalf("%d unapplied rows after the drain", got)
	}
	if gaps := c.outboxGaps(); len(gaps) > 0 {
		t.Fatalf("after recovery: %s", strings.Join(gaps, "; "))
	}
	ws := openWarm(t, n.URL())
	if bad := warmMismatches(t, ws, c.coldRuns()); len(bad) > 0 {
		t.Fatalf("%d warm entries do not match cold:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	c.stopGracefully()
}
