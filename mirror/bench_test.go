package mirror_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// lagStore is a memory warm store that notes when each succeeded step
// entry arrives, for the commit-to-warm lag.
type lagStore struct {
	warm.Store
	mu   sync.Mutex
	seen map[string]time.Time
}

func (l *lagStore) PutStep(ctx context.Context, s *warm.StepEntry) error {
	if s.Status == "succeeded" {
		now := time.Now()
		l.mu.Lock()
		l.seen[s.RunID+"/"+s.StepID] = now
		l.mu.Unlock()
	}
	return l.Store.PutStep(ctx, s)
}

// BenchmarkMirrorPostgres measures what the mirror costs the cold write
// path on PostgreSQL and how far the warm tier lags behind it. Each
// iteration runs 16 runs of 10 steps at once, each step being the two
// fenced transactions the engine writes (OnNodeStart, OnNodeComplete),
// through the bare pgstore (mirror=off) or through mirror.Adapter with
// the hook and a running drainer into the memory warm store (mirror=on);
// mirror=hook has the hook's outbox rows but no drainer (the write-path
// share of the cost); mirror=noop installs a hook that does nothing (what
// the stores themselves do for any hook).
// Reports steps/s and, with the mirror, the p50/p99 lag from a step's
// OnNodeComplete returning to its succeeded entry being in the warm
// store.
func BenchmarkMirrorPostgres(b *testing.B) {
	const runs, steps = 16, 10
	for _, mode := range []string{"off", "noop", "hook", "on"} {
		on := mode == "on"
		b.Run("mirror="+mode, func(b *testing.B) {
			schema := newSchema(b)
			var hooks []state.TxHook
			switch mode {
			case "noop":
				hooks = []state.TxHook{func(context.Context, state.HookTx, *state.Change) error { return nil }}
			case "hook", "on":
				hooks = []state.TxHook{mirror.Hook()}
			}
			c := openPG(b, schema, hooks)
			var a state.Adapter = c
			ls := &lagStore{Store: memory.New(), seen: map[string]time.Time{}}
			var m *mirror.Adapter
			if on {
				var err error
				m, err = mirror.New(c, mirror.Config{Warm: ls, SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { m.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				a = m
			}
			var (
				mu        sync.Mutex
				committed = map[string]time.Time{}
			)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				errs := make(chan error, runs)
				for range runs {
					wg.Go(func() {
						ctx := context.Background()
						r, err := a.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
						if err == nil {
							r, err = startRunE(a, r.ID)
						}
						for i := 0; err == nil && i < steps; i++ {
							id := fmt.Sprintf("s%02d", i)
							k := state.StepKey{RunID: r.ID, Attempt: r.Attempt, StepID: id}
							if err = a.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: r.Lease(), Kind: "noop", Try: 1}); err != nil {
								break
							}
							err = a.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: k, Lease: r.Lease(), Try: 1, Output: []byte(`{"v":1}`)})
							now := time.Now()
							mu.Lock()
							committed[r.ID+"/"+id] = now
							mu.Unlock()
						}
						if err == nil {
							_, err = a.OnRunComplete(ctx, &state.RunCompleteParams{RunID: r.ID, Lease: r.Lease()})
						}
						if err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*runs*steps)/elapsed.Seconds(), "steps/s")
			if !on {
				return
			}
			eventually(b, "the outbox to drain", func() bool { return pending(b, c) == 0 })
			ls.mu.Lock()
			defer ls.mu.Unlock()
			var lags []time.Duration
			for k, at := range committed {
				seen, ok := ls.seen[k]
				if !ok {
					b.Fatalf("step %s never reached the warm store", k)
				}
				lags = append(lags, max(seen.Sub(at), 0))
			}
			slices.Sort(lags)
			pct := func(p float64) float64 {
				return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "lag-p50-ms")
			b.ReportMetric(pct(0.99), "lag-p99-ms")
			b.ReportMetric(pct(1), "lag-max-ms")
		})
	}
}
