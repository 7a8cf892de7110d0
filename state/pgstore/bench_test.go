package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
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
