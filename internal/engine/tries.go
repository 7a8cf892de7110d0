package engine

import (
	"context"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Tries (SPEC §1 "tries", §3 "node_start per try"; decision 95).
//
// A step instance's tries count its starts within one attempt: the count is
// workflow_steps.tries, and each start's node_start carries its number as
// payload "try" (as do the node_retry, node_complete or node_error that
// end it). One try, one node_start.
//
// A leaf step (service_call, context_set, session_*, fail, custom) starts
// a try each time it is executed: try 1, then try 2 after a failed try
// that is retried, and so on. A try cut off mid-flight — the runner
// stopped past its grace period, `starflow run` was interrupted — and
// continued by the next runner in the same attempt is the next try as
// well: the ledger shows that the step started again (it runs again with
// the same idempotency key). The retry budget (retry_policy.max_attempts)
// counts the failed tries of one execution only: a try cut off by the
// runner stopping is not the step's failure, so the continuation gets the
// whole budget.
//
// A construct (if, try, repeat_until, for_each, parallel) and a durable
// wait (wait, workflow_call) are entered, not tried: when the engine
// reaches one whose row of the attempt is still open (running, or waiting
// for a wake) — a run continued after a wake, a graceful release or an
// interrupted `starflow run` — it is re-entered and writes no second
// node_start; its one node_start is followed by one node_complete or
// node_error. Retries happen to the leaf steps inside a construct. Only
// an instance whose row ended without success in this attempt (failed,
// skipped, cancelled) and is executed again (an enclosing try construct
// re-entered) starts a new try.
//
// The engine reads the attempt's step rows once, when the execution
// begins (loadSteps): the lease fences every other writer, and an
// execution enters each step instance at most once. The stores refuse a
// node_start whose try is not above the row's tries (ErrConflict), so a
// try number is never started twice.

// loadSteps reads the step rows of the current attempt that an earlier
// execution of it left unfinished (succeeded ones are restored from their
// checkpoints instead).
func (rs *runState) loadSteps(ctx context.Context) error {
	steps, err := rs.e.cfg.Store.ListSteps(ctx, &state.ListStepsParams{RunID: rs.run.ID, Attempt: rs.run.Attempt})
	if err != nil {
		return fmt.Errorf("load step rows: %w", err)
	}
	rs.found = map[string]*starflowtype.Step{}
	failedRows := false
	for _, st := range steps {
		if st.Attempt == rs.run.Attempt && st.Status != starflowtype.StepSucceeded {
			rs.found[st.ScopePath+"\x00"+st.StepID] = st
			failedRows = failedRows || st.Status == starflowtype.StepFailed
		}
	}
	if !failedRows {
		return nil
	}
	return rs.loadFailures(ctx)
}

// priorTries is how many tries of the instance were started in this
// attempt before this execution.
func (rs *runState) priorTries(scope, stepID string) int {
	if st := rs.found[scope+"\x00"+stepID]; st != nil {
		return st.Tries
	}
	return 0
}

// openTry is the try of the instance's row when this execution found it
// open (running or waiting), 0 otherwise.
func (rs *runState) openTry(scope, stepID string) int {
	st := rs.found[scope+"\x00"+stepID]
	if st == nil || (st.Status != starflowtype.StepRunning && st.Status != starflowtype.StepWaiting) {
		return 0
	}
	return max(st.Tries, 1)
}

// enter starts a construct or a durable wait once: re-entering an
// instance whose row is open writes nothing and returns its try; otherwise
// node_start is written for the next try.
func (rs *runState) enter(scope, stepID, kind string) (int, error) {
	if try := rs.openTry(scope, stepID); try > 0 {
		return try, nil
	}
	if rs.replayable(scope, stepID) != nil {
		// A construct that failed in an earlier execution: walked again to
		// replay its inner failure, not started again (fail writes nothing
		// for it either).
		return max(rs.found[scope+"\x00"+stepID].Tries, 1), nil
	}
	try := rs.priorTries(scope, stepID) + 1
	return try, rs.led.nodeStart(rs.root, scope, stepID, kind, try)
}
