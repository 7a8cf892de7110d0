package starflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestSweepRecoversLostRun: a runner claims a run, completes a step and
// dies (its lease expires). The sweep at the next engine's start marks the
// run interrupted with runner_lost and re-queues it as attempt 2, which the
// engine's runner executes from the first step (replay).
func TestSweepRecoversLostRun(t *testing.T) {
	h := newHarness(t, starflow.Config{Maintenance: true})
	d := h.apply("name: lost\nsteps:\n  - id: a\n    context_set: {x: 1}\n  - id: b\n    context_set: {y: 2}\n")
	ctx := context.Background()
	run, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The runner that dies: its lease is already past (TTL in the past).
	dead, err := h.store.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "dead-runner", LeaseTTL: -time.Second})
	if err != nil || dead == nil {
		t.Fatal(dead, err)
	}
	l := dead.Lease()
	if _, err := h.store.OnRunStart(ctx, &state.RunStartParams{RunID: run.ID, Lease: l}); err != nil {
		t.Fatal(err)
	}
	k := state.StepKey{RunID: run.ID, Attempt: 1, StepID: "a"}
	if err := h.store.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: l, Kind: "context_set", Try: 1}); err != nil {
		t.Fatal(err)
	}

	h.start() // boot sweep, then the runner claims attempt 2
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	final, err := h.eng.WaitRun(wctx, run.ID)
	if err != nil || final.Status != starflowtype.RunSucceeded {
		t.Fatalf("final %+v %v", final, err)
	}
	if final.Attempt != 2 || final.LeaseEpoch != 2 {
		t.Fatalf("attempt %d epoch %d, want 2 and 2", final.Attempt, final.LeaseEpoch)
	}
	types := strings.Join(eventTypes(h.events(run.ID)), " ")
	if !strings.Contains(types, "node_start:a runner_lost run_interrupted run_claimed run_started node_start:a") {
		t.Fatalf("events: %s", types)
	}
	// The lost attempt's step row ended with it; attempt 2 ran both steps.
	steps := h.steps(run.ID)
	if len(steps) != 3 || steps[0].Attempt != 1 || steps[0].Status != starflowtype.StepFailed || steps[0].Error != "runner_lost" {
		t.Fatalf("ledger after recovery: %+v", steps[0])
	}
	// The dead runner is fenced out for good.
	if _, err := h.store.OnRunComplete(ctx, &state.RunCompleteParams{RunID: run.ID, Lease: l}); err == nil {
		t.Fatal("the dead runner's write was accepted")
	}
}
