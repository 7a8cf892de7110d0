package statetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testTrace: EnqueueRun stores the run's trace (trace_id, trace_parent)
// and every read of the run returns it, unchanged by a claim, a release, a
// new attempt and an idempotent repeat that brings another trace; a run
// enqueued without one has none.
func (s *suite) testTrace(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	wantTrace := func(what string, r *starflowtype.Run, id, tp string) {
		t.Helper()
		equal(t, what+" trace_id", r.TraceID, id)
		equal(t, what+" trace_parent", r.TraceParent, tp)
	}
	key := uuid.NewString()
	r := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3, IdempotencyKey: key, TraceID: traceID, TraceParent: parent})
	wantTrace("EnqueueRun", r, traceID, parent)
	wantTrace("GetRun", h.getRun(r.ID), traceID, parent)
	again := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: key, TraceID: "0af7651916cd43dd8448eb211c80319c",
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	equal(t, "repeat's run", again.ID, r.ID)
	wantTrace("idempotent repeat", again, traceID, parent)

	started, l := h.claimAndStart(r.ID, runnerA)
	wantTrace("OnRunStart", started, traceID, parent)
	if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: r.ID, Lease: l}); err != nil {
		t.Fatalf("ClearLease: %v", err)
	}
	_, l = h.claimAndStart(r.ID, runnerB)
	failed, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: r.ID, Lease: l, Error: "boom", Retry: true})
	if err != nil {
		t.Fatalf("OnRunError: %v", err)
	}
	equal(t, "attempt after a retried failure", failed.Attempt, 2)
	wantTrace("the next attempt", failed, traceID, parent)
	again2, _ := h.claimAndStart(r.ID, runnerA)
	wantTrace("attempt 2 started", again2, traceID, parent)
	listed, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{Limit: 10})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	for _, lr := range listed {
		if lr.ID == r.ID {
			wantTrace("ListRuns", lr, traceID, parent)
		}
	}

	plain := h.enqueue(nil)
	wantTrace("a run enqueued without a trace", h.getRun(plain.ID), "", "")
}
