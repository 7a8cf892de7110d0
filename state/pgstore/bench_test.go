package pgstore_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// BenchmarkStep measures one step's two fenced transactions, OnNodeStart
// and OnNodeComplete (ledger row, event, checkpoint), on a started run.
func BenchmarkStep(b *testing.B) {
	s := fresh(b)
	ctx := b.Context()
	r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Hour})
	if err != nil || c == nil {
		b.Fatalf("ClaimRun = %+v, %v", c, err)
	}
	l := c.Lease()
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: r.ID, Lease: l}); err != nil {
		b.Fatal(err)
	}
	out := json.RawMessage(`{"status":200,"body":{"id":"r-1"}}`)
	b.ResetTimer()
	for i := range b.N {
		k := state.StepKey{RunID: r.ID, Attempt: 1, StepID: fmt.Sprintf("s%d", i)}
		if err := s.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: l, Kind: "context_set", Try: 1}); err != nil {
			b.Fatal(err)
		}
		if err := s.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: k, Lease: l, Try: 1, Output: out, Context: json.RawMessage(`{"k":1}`)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkEnqueueClaim measures an enqueue and the claim that takes it.
func BenchmarkEnqueueClaim(b *testing.B) {
	s := fresh(b)
	ctx := b.Context()
	b.ResetTimer()
	for range b.N {
		if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
			b.Fatal(err)
		}
		if c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Minute}); err != nil || c == nil {
			b.Fatalf("ClaimRun = %+v, %v", c, err)
		}
	}
}

// BenchmarkClaimIdle measures a runner's poll of an empty queue.
func BenchmarkClaimIdle(b *testing.B) {
	s := fresh(b)
	ctx := b.Context()
	b.ResetTimer()
	for range b.N {
		if c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Minute}); err != nil || c != nil {
			b.Fatalf("ClaimRun = %+v, %v", c, err)
		}
	}
}

// BenchmarkStepWrites measures the store alone at the side-by-side
// benchmark's shape: 16 runs at once, each writing its context_set steps
// (start and completion in one write), through the one-statement step
// writes (group-committed) and through the generic statement path.
func BenchmarkStepWrites(b *testing.B) {
	for _, v := range []struct {
		name       string
		statements bool
	}{{"batched", false}, {"statements", true}} {
		b.Run(v.name, func(b *testing.B) {
			cfg := pgstore.Config{Schema: newSchema(b), MaxConns: 20}
			if v.statements {
				pgstore.StatementsOnly(&cfg)
			}
			s := openConfig(b, cfg)
			ctx := b.Context()
			const runs = 16
			type live struct {
				id string
				l  starflowtype.Lease
			}
			var all []live
			for range runs {
				r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
				if err != nil {
					b.Fatal(err)
				}
				c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Hour})
				if err != nil || c == nil {
					b.Fatalf("ClaimRun = %+v, %v", c, err)
				}
				if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: c.ID, Lease: c.Lease()}); err != nil {
					b.Fatal(err)
				}
				all = append(all, live{c.ID, c.Lease()})
				_ = r
			}
			per := max(1, b.N/runs)
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, r := range all {
				wg.Go(func() {
					for i := range per {
						k := state.StepKey{RunID: r.id, Attempt: 1, StepID: fmt.Sprintf("s%d", i)}
						if err := s.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: k, Lease: r.l, Try: 1, Kind: "context_set",
							WithStart: true, Output: json.RawMessage(`1`), Context: json.RawMessage(`{"k":1}`)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(per*runs)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
