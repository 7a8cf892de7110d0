package starflow_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
)

// pgBenchSteps is the length of the PostgreSQL benchmark workflow.
const pgBenchSteps = 10

func pgBenchDefinition() []byte {
	var b strings.Builder
	b.WriteString("name: pg-bench\nsteps:\n")
	for i := 0; i < pgBenchSteps; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    context_set: {v%02d: \"${{ %d + 1 }}\"}\n", i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkPostgresSteps runs 10-step context_set workflows through the
// whole engine on PostgreSQL with 1, 4 and 16 runs in flight at once (one
// in-process runner, concurrency 16). Each iteration enqueues `runs` runs
// and waits for all of them. Reports durable steps/s; compare with the
// pgbench floor (bench/pgbench, docs/benchmarks.md).
func BenchmarkPostgresSteps(b *testing.B) {
	for _, runs := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			ctx := context.Background()
			store := openPG(b)
			eng, err := starflow.New(starflow.Config{Store: store, Concurrency: 16, Logger: quietLogger(), WakeKeys: pgWakeKeys})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := eng.Apply(ctx, "bench.yaml", pgBenchDefinition()); err != nil {
				b.Fatal(err)
			}
			if err := eng.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer eng.Stop(ctx)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				errs := make(chan error, runs)
				for r := 0; r < runs; r++ {
					run, err := eng.Enqueue(ctx, "pg-bench", nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						got, err := eng.WaitRun(ctx, run.ID)
						if err == nil && got.Status != "succeeded" {
							err = fmt.Errorf("run %s: %s", got.Status, got.Error)
						}
						errs <- err
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			elapsed := time.Since(start)
			steps := float64(b.N * runs * pgBenchSteps)
			b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(elapsed.Nanoseconds())/steps, "ns/step")
		})
	}
}

// BenchmarkPostgresClaim measures claim throughput: 1 000 queued runs per
// round claimed by 8 concurrent claimers (FOR UPDATE SKIP LOCKED).
func BenchmarkPostgresClaim(b *testing.B) {
	ctx := context.Background()
	store := openPG(b)
	const perRound, claimers = 1000, 8
	b.ResetTimer()
	var claimTime time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for r := 0; r < perRound; r++ {
			if _, err := store.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "claim-bench"}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for c := 0; c < claimers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, err := store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: fmt.Sprintf("c%d", c), LeaseTTL: time.Minute})
					if err != nil {
						b.Error(err)
						return
					}
					if r == nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		claimTime += time.Since(start)
	}
	b.ReportMetric(float64(b.N*perRound)/claimTime.Seconds(), "claims/s")
}

// hideListener wraps a store so the engine cannot see its Listen method:
// runners then find new work by polling only.
type hideListener struct{ state.Adapter }

// BenchmarkPostgresEnqueueToStart measures the latency from an enqueue's
// commit in one engine (no runner) to the run's start by another engine's
// idle runner, with LISTEN/NOTIFY and with polling only (200 ms). Database
// clock: started_at − created_at. Reports p50 and p99 in ms.
func BenchmarkPostgresEnqueueToStart(b *testing.B) {
	for _, listen := range []bool{true, false} {
		b.Run(fmt.Sprintf("notify=%v", listen), func(b *testing.B) {
			ctx := context.Background()
			store := openPG(b)
			var runnerStore state.Adapter = store
			if !listen {
				runnerStore = hideListener{store}
			}
			worker, err := starflow.New(starflow.Config{Store: runnerStore, Logger: quietLogger(), WakeKeys: pgWakeKeys})
			if err != nil {
				b.Fatal(err)
			}
			client, err := starflow.New(starflow.Config{Store: store, NoRunner: true, Logger: quietLogger(), WakeKeys: pgWakeKeys})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := client.Apply(ctx, "one.yaml", []byte("name: one\nsteps:\n  - id: a\n    context_set: {x: 1}\n")); err != nil {
				b.Fatal(err)
			}
			if err := worker.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer worker.Stop(ctx)
			time.Sleep(200 * time.Millisecond) // let the listener connect before measuring
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run, err := client.Enqueue(ctx, "one", nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				got, err := worker.WaitRun(ctx, run.ID)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, got.StartedAt.Sub(got.CreatedAt))
				// Idle between enqueues, as a real lull would be.
				time.Sleep(time.Duration(10+i%40) * time.Millisecond)
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 {
				return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
