package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state/sqlitestore"
)

const pausedWorkflow = `name: paused
steps:
  - id: hold
    wait: {signal: never}
`

// BenchmarkPausedRunsRSS measures the resident memory (VmRSS) of a real
// `starflow worker` process with N paused runs in its store (N = 10 and
// 10,000): once for the worker that executed the runs up to their waits
// and parked them (after it has been idle for the settle time), and once
// per iteration for a fresh worker started on the store that already
// holds the N paused runs. The parker is measured twice: 5 s after the
// last run parked, and again after the runtime's forced GC has run (2 min
// idle), which tells memory the worker holds from heap the runtime has
// not yet returned. Paused runs hold no lease and nothing in memory, so
// the idle figures should not grow with N.
//
//	STARFLOW_BENCH_IDLE=1 go test -run='^$' -bench=PausedRunsRSS -benchtime=3x -timeout=30m ./cmd/starflow
//
// With -short (CI's one-iteration smoke run) it parks 10 and 100 runs and
// settles 500 ms: it proves the benchmark runs, its figures mean nothing.
func BenchmarkPausedRunsRSS(b *testing.B) {
	sizes, settle := []int{10, 10_000}, 5*time.Second
	if testing.Short() {
		sizes, settle = []int{10, 100}, 500*time.Millisecond
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("paused=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			db := filepath.Join(dir, "paused.db")
			store, err := sqlitestore.Open(sqlitestore.Config{Path: db, Synchronous: sqlitestore.SynchronousNormal})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			ctx := context.Background()
			if err := store.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := eng.Apply(ctx, "paused.yaml", []byte(pausedWorkflow)); err != nil {
				b.Fatal(err)
			}
			parker := startBenchWorker(b, dir, db)
			for i := range n {
				if _, err := eng.Enqueue(ctx, "paused", map[string]any{"i": i}, nil); err != nil {
					b.Fatal(err)
				}
			}
			parked := func() int {
				var c int
				if err := store.DB().QueryRow(`SELECT count(*) FROM workflow_runs WHERE claim_state = 'parked' AND leased_by IS NULL`).Scan(&c); err != nil {
					b.Fatal(err)
				}
				return c
			}
			deadline := time.Now().Add(10 * time.Minute)
			for parked() < n {
				if time.Now().After(deadline) {
					b.Fatalf("only %d of %d runs parked after 10 min", parked(), n)
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(settle)
			parkerRSS := rssKiB(b, parker.Process.Pid)
			// The Go runtime forces a GC every 2 minutes in an otherwise idle
			// process, and the scavenger then returns freed pages: what is
			// left is what the worker still holds. That wait is opt-in
			// (STARFLOW_BENCH_IDLE=1) so CI's one-iteration smoke run of
			// every benchmark stays short; without it there is no idle figure.
			var parkerIdleRSS int64
			idle := os.Getenv("STARFLOW_BENCH_IDLE") == "1"
			if idle {
				time.Sleep(forcedGCPeriod + 10*time.Second)
				parkerIdleRSS = rssKiB(b, parker.Process.Pid)
			}
			stopBenchWorker(parker)

			b.ResetTimer()
			var fresh int64
			for range b.N {
				w := startBenchWorker(b, dir, db)
				time.Sleep(settle)
				fresh += rssKiB(b, w.Process.Pid)
				stopBenchWorker(w)
			}
			b.StopTimer()
			b.ReportMetric(float64(parkerRSS), "parker_rss_KiB")
			if idle {
				b.ReportMetric(float64(parkerIdleRSS), "parker_idle_rss_KiB")
			}
			b.ReportMetric(float64(fresh)/float64(b.N), "fresh_rss_KiB")
			b.Logf("%d paused runs: RSS of the worker that parked them %d KiB after %s, %d KiB after %s idle; of a fresh worker %d KiB",
				n, parkerRSS, settle, parkerIdleRSS, settle+forcedGCPeriod+10*time.Second, fresh/int64(b.N))
		})
	}
}

// forcedGCPeriod is the Go runtime's forced-GC period (runtime
// forcegcperiod).
const forcedGCPeriod = 2 * time.Minute

// startBenchWorker starts `starflow worker` on db and waits for its
// "started" line.
func startBenchWorker(b *testing.B, dir, db string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(binary, "worker", "--db", db, "--poll-interval", "200ms", "--concurrency", "16")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	out, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	var seen strings.Builder
	for !strings.Contains(seen.String(), " started on ") {
		k, err := out.Read(buf)
		seen.Write(buf[:k])
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			b.Fatalf("worker did not start: %v\n%s", err, seen.String())
		}
	}
	go io.Copy(io.Discard, out)
	return cmd
}

func stopBenchWorker(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// rssKiB reads VmRSS (KiB) from /proc/PID/status.
func rssKiB(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("reading the worker's memory: %v (Linux /proc needed)", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS line %q: %v", line, err)
			}
			return v
		}
	}
	b.Fatal("no VmRSS in /proc/PID/status")
	return 0
}
