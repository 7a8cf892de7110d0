package sfbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/bench/internal/workload"
	"github.com/starflow/starflow/step"
)

// LatencyResult is enqueue→first-step latency at a steady enqueue rate.
type LatencyResult struct {
	Store      string
	Runs       int
	Rate       float64 // runs/s asked for
	P50, P99   time.Duration
	Max        time.Duration
	Concurrent int
	Err        error
}

// Latency enqueues runs at a steady rate for dur (each Enqueue in a
// goroutine of its own, so a slow one does not delay the next) into one
// engine with rc.Concurrency run slots. The workflow's first step is a
// registered custom step that records when its handler starts. Latency =
// from just before Enqueue is called (so it includes the enqueue's own
// commit) to that handler's start. The workflow has steps steps: the
// marking step, then steps-1 context_set steps.
func Latency(ctx context.Context, rc workload.RunConfig, rate float64, dur time.Duration, steps int) LatencyResult {
	res := LatencyResult{Store: rc.Store, Rate: rate, Concurrent: rc.Concurrency}
	res.Err = func() error {
		store, _, cleanup, err := OpenStore(ctx, rc)
		if err != nil {
			return err
		}
		defer cleanup()
		eng, err := starflow.New(starflow.Config{Store: store, Concurrency: rc.Concurrency, Logger: workload.DiscardLogger, WakeKeys: WakeKeys})
		if err != nil {
			return err
		}
		var marks sync.Map // run id → time.Time the first step's handler started
		if err := eng.RegisterStep("sbs_mark", func(_ context.Context, req *step.Request) (any, error) {
			marks.LoadOrStore(req.RunID, time.Now())
			return nil, nil
		}); err != nil {
			return err
		}
		def := "name: sbs-latency\nsteps:\n  - id: mark\n    sbs_mark: {}\n"
		for i := 1; i < steps; i++ {
			def += fmt.Sprintf("  - id: %s\n    context_set: {v%02d: %d}\n", workload.StepName(i), i, i)
		}
		if _, err := eng.Apply(ctx, "latency.yaml", []byte(def)); err != nil {
			return err
		}
		if err := eng.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = eng.Stop(sctx)
		}()

		n := max(1, int(rate*dur.Seconds()))
		interval := time.Duration(float64(time.Second) / rate)
		type sent struct {
			id  string
			at  time.Time
			err error
		}
		sends := make([]sent, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < n; i++ {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := time.Now()
				run, err := eng.Enqueue(ctx, "sbs-latency", nil, nil)
				sends[i] = sent{at: at, err: err}
				if err == nil {
					sends[i].id = run.ID
				}
			}()
		}
		wg.Wait()
		lat := make([]time.Duration, 0, n)
		for _, s := range sends {
			if s.err != nil {
				return s.err
			}
			run, err := eng.WaitRun(ctx, s.id)
			if err != nil {
				return err
			}
			if run.Status != "succeeded" {
				return fmt.Errorf("run %s ended %s: %s", s.id, run.Status, run.Error)
			}
			t, ok := marks.Load(s.id)
			if !ok {
				return fmt.Errorf("run %s succeeded but its first step never ran", s.id)
			}
			lat = append(lat, t.(time.Time).Sub(s.at))
		}
		slices.Sort(lat)
		res.Runs = len(lat)
		res.P50 = percentile(lat, 0.50)
		res.P99 = percentile(lat, 0.99)
		res.Max = lat[len(lat)-1]
		return nil
	}()
	return res
}

// percentile returns the p-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
