package starflow_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/warm/memory"
)

// openPGHooks is openPG with hooks installed.
func openPGHooks(tb testing.TB, hooks []state.TxHook) *pgstore.Store {
	tb.Helper()
	ctx := context.Background()
	pgtest.Require(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_root_" + hex.EncodeToString(b[:])
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: schema, Hooks: hooks})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		if c, err := pgx.Connect(context.Background(), pgtest.URL()); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			c.Close(context.Background())
		}
	})
	if err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkPostgresStepsMirror is BenchmarkPostgresSteps (16 runs of the
// 10-step workflow in flight, one runner of concurrency 16) with the warm
// tier off and on: on, the store has the mirror's hook and the engine a
// memory warm store, so every step also writes outbox rows and the
// engine's drainer applies them (docs/benchmarks.md, issue 6).
func BenchmarkPostgresStepsMirror(b *testing.B) {
	const runs = 16
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("mirror=%v", on), func(b *testing.B) {
			ctx := context.Background()
			cfg := starflow.Config{Concurrency: 16, Logger: quietLogger(), WakeKeys: pgWakeKeys}
			if on {
				cfg.Store = openPGHooks(b, []state.TxHook{mirror.Hook()})
				cfg.Warm = memory.New()
			} else {
				cfg.Store = openPGHooks(b, nil)
			}
			eng, err := starflow.New(cfg)
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
			for range b.N {
				var wg sync.WaitGroup
				errs := make(chan error, runs)
				for range runs {
					run, err := eng.Enqueue(ctx, "pg-bench", nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() {
						got, err := eng.WaitRun(ctx, run.ID)
						if err == nil && got.Status != "succeeded" {
							err = fmt.Errorf("run %s: %s", got.Status, got.Error)
						}
						errs <- err
					})
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
			b.ReportMetric(float64(b.N*runs*pgBenchSteps)/elapsed.Seconds(), "steps/s")
		})
	}
}
