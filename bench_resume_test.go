package starflow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
)

// BenchmarkResume10k measures how long the engine takes to resume a run
// with 10 000 committed step instances (SQLite, default settings): the run's
// runner released it after 10 000 of its 10 001 steps; the next claim
// restores all of them from their checkpoints and executes the last one.
// Reports ms per resume (claim to run end).
func BenchmarkResume10k(b *testing.B) {
	const steps = 10000
	var def strings.Builder
	def.WriteString("name: long\nsteps:\n")
	for i := 0; i <= steps; i++ {
		fmt.Fprintf(&def, "  - id: s%05d\n    context_set: {v%d: %d}\n", i, i%50, i)
	}
	ctx := context.Background()
	store := openBenchStore(b, "NORMAL")
	eng, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	d, err := eng.Apply(ctx, "long.yaml", []byte(def.String()))
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		run, err := eng.Enqueue(ctx, d.Name, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		// A runner commits 10 000 steps, then releases the run.
		c, err := store.ClaimRun(ctx, &state.ClaimRunParams{RunID: run.ID, RunnerID: "first", LeaseTTL: time.Hour})
		if err != nil || c == nil {
			b.Fatal(c, err)
		}
		l := c.Lease()
		if _, err := store.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: l}); err != nil {
			b.Fatal(err)
		}
		for s := 0; s < steps; s++ {
			k := state.StepKey{RunID: run.ID, Attempt: 1, StepID: fmt.Sprintf("s%05d", s)}
			kv := fmt.Sprintf(`{"v%d":%d}`, s%50, s)
			if err := store.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: l, Kind: "context_set", Try: 1}); err != nil {
				b.Fatal(err)
			}
			if err := store.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: k, Lease: l, Try: 1, Output: []byte(kv), Context: []byte(kv)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := store.ClearLease(ctx, &state.ClearLeaseParams{RunID: run.ID, Lease: l}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := eng.Start(ctx); err != nil {
			b.Fatal(err)
		}
		final, err := eng.WaitRun(ctx, run.ID)
		if err != nil || final.Status != "succeeded" {
			b.Fatalf("resumed run: %v %v", final, err)
		}
		total += time.Since(start)
		b.StopTimer()
		eng.Stop(ctx)
		if eng, err = starflow.New(starflow.Config{Store: store, Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/resume")
}

// BenchmarkCheckpointBytes1MiB reports the checkpoint bytes written per step
// of a run whose context holds 1 MiB: the first step sets a 1 MiB variable,
// the next 20 each change one small one. Checkpoints are deltas, so the
// small steps write bytes in proportion to what they changed.
func BenchmarkCheckpointBytes1MiB(b *testing.B) {
	var def strings.Builder
	def.WriteString("name: heavy\nsteps:\n  - id: load\n    context_set: {blob: \"${{ input.blob }}\"}\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&def, "  - id: s%02d\n    context_set: {n%02d: %d}\n", i, i, i)
	}
	ctx := context.Background()
	store := openBenchStore(b, "NORMAL")
	// The input is 1 MiB of text plus its JSON framing, just over the
	// default cap (limits.input_bytes): raise it as an operator would.
	eng, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger(), Limits: starflow.Limits{InputBytes: 2 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.Apply(ctx, "heavy.yaml", []byte(def.String())); err != nil {
		b.Fatal(err)
	}
	eng.Start(ctx)
	defer eng.Stop(ctx)
	input := map[string]any{"blob": strings.Repeat("x", 1<<20)}
	var small, first int64
	for i := 0; i < b.N; i++ {
		run, err := eng.Enqueue(ctx, "heavy", input, nil)
		if err != nil {
			b.Fatal(err)
		}
		if r, err := eng.WaitRun(ctx, run.ID); err != nil || r.Status != "succeeded" {
			b.Fatal(r, err)
		}
		var loadBytes, smallBytes int64
		if err := store.DB().QueryRow(`SELECT coalesce(sum(length(context_json) + length(outputs_json)), 0) FROM workflow_run_checkpoints WHERE run_id = ? AND step_id = 'load'`, run.ID).Scan(&loadBytes); err != nil {
			b.Fatal(err)
		}
		if err := store.DB().QueryRow(`SELECT coalesce(sum(length(context_json) + length(outputs_json)), 0) FROM workflow_run_checkpoints WHERE run_id = ? AND step_id <> 'load'`, run.ID).Scan(&smallBytes); err != nil {
			b.Fatal(err)
		}
		first += loadBytes
		small += smallBytes
	}
	b.ReportMetric(float64(small)/float64(20*b.N), "bytes/step")
	b.ReportMetric(float64(first)/float64(b.N), "bytes/1MiB-step")
}
