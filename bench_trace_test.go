package starflow_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/starflow/starflow"
)

// BenchmarkSQLiteContextSet20Traced is BenchmarkSQLiteContextSet20 with
// tracing on: an SDK provider that records every span (sampled, ended)
// and exports none, the cost of making the spans (docs/benchmarks.md).
func BenchmarkSQLiteContextSet20Traced(b *testing.B) {
	forEachSync(b, func(b *testing.B, sync string) {
		ctx := context.Background()
		tp := sdktrace.NewTracerProvider()
		defer tp.Shutdown(ctx)
		eng, err := starflow.New(starflow.Config{Store: openBenchStore(b, sync), Concurrency: 1, Logger: quietLogger(), TracerProvider: tp})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Apply(ctx, "bench.yaml", benchDefinition()); err != nil {
			b.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer eng.Stop(ctx)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			run, err := eng.Enqueue(ctx, "bench-context-set", nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if run, err = eng.WaitRun(ctx, run.ID); err != nil || run.Status != "succeeded" {
				b.Fatalf("run %v: %v %s", run.Status, err, run.Error)
			}
		}
		reportSteps(b, time.Since(start))
	})
}
