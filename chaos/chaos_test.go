//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/warm/natskv"
)

var (
	flagDuration  = flag.Duration("chaos.duration", 2*time.Minute, "how long faults are injected")
	flagCalm      = flag.Duration("chaos.calm", 15*time.Second, "how long the same load runs without faults first (the throughput baseline)")
	flagSeed      = flag.Uint64("chaos.seed", 1, "seed of every random choice: faults, their timing, the service's answers, the workload")
	flagInputs    = flag.Int("chaos.inputs", 4, "inputs per workflow: n is drawn from 0…inputs-1")
	flagInflight  = flag.Int("chaos.inflight", 24, "runs the producers keep in flight")
	flagMinFaults = flag.Int("chaos.min-faults", 0, "fail unless every fault kind was injected at least this many times")
	flagReport    = flag.String("chaos.report", "", "also write the table to this file")
)

// TestChaos is the harness: reference runs, a calm phase, the chaos phase,
// a settling phase, then the invariants (see the package doc).
func TestChaos(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()
	d := newDeployment(t, ctx, *flagSeed)
	dr := newDriver(d, *flagSeed, *flagInputs)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go dr.poll(pollCtx)

	// 1. Reference: every input of every workflow once, uninterrupted.
	for _, wf := range enqueued {
		for n := range *flagInputs {
			if _, err := dr.start(ctx, wf, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	dr.waitIdle(t, 3*time.Minute, "the reference runs")
	ref := references(t, ctx, d)

	// 2. Calm: the load, no faults.
	calmFrom := time.Now()
	pctx, stop := context.WithTimeout(ctx, *flagCalm)
	dr.produce(pctx, 4, *flagInflight)
	stop()
	calmTo := time.Now()

	// 3. Chaos: the processes restarted with the fault layer's rules,
	// then the same load while the injector runs.
	d.faultsOn.Store(true)
	d.restartAll()
	chaosFrom := time.Now()
	fctx, stopFaults := context.WithTimeout(ctx, *flagDuration)
	in := newInjector(d, *flagSeed)
	done := make(chan struct{})
	go func() { in.run(fctx); close(done) }()
	dr.produce(fctx, 4, *flagInflight)
	stopFaults()
	chaosTo := time.Now()
	<-done

	// 4. Settle: everything healed and started again without rules, the
	// schedule paused, every run left to end.
	d.faultsOn.Store(false)
	d.healAll()
	d.restartAll()
	d.pauseTicks(t, ctx)
	dr.waitIdle(t, 4*time.Minute, "the runs to end after the faults")
	// Every run of the database, children and ticks included, and every
	// outbox row.
	waitNone(t, ctx, d, "runs not ended", `SELECT count(*) FROM workflow_runs WHERE status NOT IN ('succeeded', 'failed', 'cancelled')`, 3*time.Minute)
	waitNone(t, ctx, d, "outbox rows unapplied", `SELECT count(*) FROM mirror_outbox WHERE applied_at IS NULL`, 2*time.Minute)
	// Two warm sweeps, so that a warm entry corrected by the sweep (NATS
	// lost what it had acknowledged) is compared after its correction.
	time.Sleep(7 * time.Second)

	// 5. The invariants.
	cold, err := pgstore.Open(ctx, pgstore.Config{URL: d.storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	warmStore, err := natskv.Open(ctx, d.warmURL, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer warmStore.Close()
	report, err := Check(ctx, Input{DB: d.db, Warm: warmStore, Cold: cold, Effects: d.svc.Effects(), Reference: ref})
	if err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	printTable(&out, d, dr, in, report, tableTimes{began: began, calmFrom: calmFrom, calmTo: calmTo, chaosFrom: chaosFrom, chaosTo: chaosTo})
	fmt.Print(out.String())
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, []byte(out.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	if n := dr.signalsLost.Load(); n > 0 {
		t.Errorf("%d runs' signals were not taken by the server within %s after the faults (their runs wait for them)", n, signalPatience)
	}
	if n := len(report.Violations); n > 0 {
		for _, p := range d.all() {
			t.Logf("--- last lines of %s:\n%s", p.name, p.tail())
		}
		t.Fatalf("%d invariant violations (above, each with its run id and history)", n)
	}
	if *flagMinFaults > 0 {
		counts := faultCounts(d, in)
		for _, kind := range allFaultKinds() {
			if counts[kind] < *flagMinFaults {
				t.Errorf("fault %s injected %d times, fewer than -chaos.min-faults=%d", kind, counts[kind], *flagMinFaults)
			}
		}
	}
}

// waitIdle waits until every run the driver enqueued has ended.
func (dr *driver) waitIdle(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for dr.pendingCount() > 0 {
		if time.Now().After(deadline) {
			dr.mu.Lock()
			var ids []string
			for id := range dr.pending {
				ids = append(ids, id+" ("+dr.all[id]+")")
			}
			dr.mu.Unlock()
			sort.Strings(ids)
			if len(ids) > 10 {
				ids = ids[:10]
			}
			// Not fatal: the checker reports each run left behind, with
			// its history.
			t.Errorf("%s: %d runs had not ended after %s, e.g. %s", what, dr.pendingCount(), timeout, strings.Join(ids, ", "))
			for _, p := range dr.d.all() {
				t.Logf("--- last lines of %s:\n%s", p.name, p.tail())
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitNone waits until the count query finds nothing left (what: what
// is counted, for the log when the timeout passes first; the checker then
// reports each one).
func waitNone(t *testing.T, ctx context.Context, d *deployment, what, query string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := d.db.QueryRow(ctx, query).Scan(&n)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("%d %s left after %s (err %v; the checker says which)", n, what, timeout, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pauseTicks pauses chaos-tick's schedule through the API, retrying.
func (d *deployment) pauseTicks(t *testing.T, ctx context.Context) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := d.client().PauseSchedules(cctx, "chaos-tick")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause chaos-tick's schedule: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// references are the outputs of the uninterrupted runs, by workflow and
// canonical input: every run that ended so far (the producers' reference
// runs, their children, the schedule's first ticks). Two runs of one input
// with different outputs make the reference itself unsound: fatal.
func references(t *testing.T, ctx context.Context, d *deployment) map[string]map[string]json.RawMessage {
	t.Helper()
	rows, err := d.db.Query(ctx, `SELECT id::text, workflow_name, status, coalesce(input_json::text, '{}'), coalesce(output_json::text, 'null') FROM workflow_runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ref := map[string]map[string]json.RawMessage{}
	for rows.Next() {
		var id, wf, status, input, output string
		if err := rows.Scan(&id, &wf, &status, &input, &output); err != nil {
			t.Fatal(err)
		}
		if status != "succeeded" {
			t.Fatalf("reference run %s of %s %s (input %s): the workload must succeed without faults", id, wf, status, input)
		}
		key, err := CanonicalJSON(json.RawMessage(input))
		if err != nil {
			t.Fatal(err)
		}
		canon, err := CanonicalJSON(json.RawMessage(output))
		if err != nil {
			t.Fatal(err)
		}
		if ref[wf] == nil {
			ref[wf] = map[string]json.RawMessage{}
		}
		if prev, ok := ref[wf][key]; ok && string(prev) != canon {
			t.Fatalf("two uninterrupted runs of %s with input %s ended with %s and %s", wf, key, prev, canon)
		}
		ref[wf][key] = json.RawMessage(canon)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, wf := range append(append([]string(nil), enqueued...), "chaos-child") {
		if len(ref[wf]) != *flagInputs {
			t.Fatalf("%d reference inputs of %s, want %d", len(ref[wf]), wf, *flagInputs)
		}
	}
	return ref
}

func allFaultKinds() []string {
	return append(append([]string(nil), externalFaults...), "storage_fail", "storage_delay", "storage_hang")
}

// faultCounts is every fault kind's count: the injector's, and the fault
// layer's lines on the processes' stderr.
func faultCounts(d *deployment, in *injector) map[string]int {
	counts := map[string]int{}
	for kind, s := range in.summary() {
		counts[kind] = s.count
	}
	d.mu.Lock()
	for kind, n := range d.injected {
		counts[kind] += n
	}
	d.mu.Unlock()
	return counts
}

type tableTimes struct{ began, calmFrom, calmTo, chaosFrom, chaosTo time.Time }

// printTable writes the harness's figures: the workload, the faults by
// kind with recovery times, the throughput with and without faults, and
// the checker's table.
func printTable(w io.Writer, d *deployment, dr *driver, in *injector, r *Report, tt tableTimes) {
	var runs, succeeded, failed, cancelled, steps int
	_ = d.db.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
		count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'cancelled') FROM workflow_runs`).Scan(&runs, &succeeded, &failed, &cancelled)
	_ = d.db.QueryRow(context.Background(), `SELECT count(*) FROM workflow_steps WHERE finished_at IS NOT NULL`).Scan(&steps)
	effects := d.svc.Effects()
	var accepted, flaky, stale int
	for _, e := range effects {
		switch {
		case e.Accepted:
			accepted++
		case e.Refused == "flaky":
			flaky++
		case e.Refused == "stale":
			stale++
		}
	}
	fmt.Fprintf(w, "\n== chaos run: seed %d, faults for %s, %s in all\n", *flagSeed, tt.chaosTo.Sub(tt.chaosFrom).Round(time.Second), time.Since(tt.began).Round(time.Second))
	fmt.Fprintf(w, "runs %d (succeeded %d, failed %d, cancelled %d), steps finished %d\n", runs, succeeded, failed, cancelled, steps)
	fmt.Fprintf(w, "side effects: %d requests, %d applied, %d refused as stale (fenced), %d failed on purpose (503)\n", len(effects), accepted, stale, flaky)
	fmt.Fprintf(w, "wakes by token: %d posted, %d applied, %d answered closed; enqueue retries %d, signal retries %d, signals not taken %d\n",
		d.svc.wakesSent.Load(), d.svc.wakesApplied.Load(), d.svc.wakesClosed.Load(), dr.enqueueRetries.Load(), dr.signalRetries.Load(),
		dr.signalsLost.Load())

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nfault\tinjected\thit runs in flight\trecovery p50\trecovery p99\tnot recovered in 90 s")
	sum := in.summary()
	counts := faultCounts(d, in)
	for _, kind := range allFaultKinds() {
		s := sum[kind]
		if s == nil {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\n", kind, counts[kind])
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\n", kind, counts[kind], s.hit, s.p50.Round(10*time.Millisecond), s.p99.Round(10*time.Millisecond), s.unrecovered)
	}
	_ = tw.Flush()

	calmSteps, calmSpan := dr.stepsBetween(tt.calmFrom, tt.calmTo)
	chaosSteps, chaosSpan := dr.stepsBetween(tt.chaosFrom, tt.chaosTo)
	calmRate, chaosRate := rate(calmSteps, calmSpan), rate(chaosSteps, chaosSpan)
	ratio := 0.0
	if calmRate > 0 {
		ratio = chaosRate / calmRate
	}
	fmt.Fprintf(w, "\nthroughput: %.1f steps/s without faults (%s), %.1f steps/s during faults (%s): %.2f×\n\n",
		calmRate, calmSpan.Round(time.Second), chaosRate, chaosSpan.Round(time.Second), ratio)
	r.Print(w)
}

func rate(n int64, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	return float64(n) / span.Seconds()
}
