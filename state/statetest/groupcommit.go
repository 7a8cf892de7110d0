package statetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// GroupCommitter is an optional ability of an adapter: it reports how its
// writes were committed together (storecore's group committer).
type GroupCommitter interface {
	// GroupCommitStats returns how many batches were committed and how
	// many writes they held (0, 0 when the adapter commits every write
	// alone).
	GroupCommitStats() (batches, writes int64)
}

// testWithStart: OnNodeComplete with WithStart is the try's start and its
// success in one write (node_start, node_complete, the checkpoint), with
// OnNodeStart's conditions.
func (s *suite) testWithStart(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	run, l := h.started(nil, runnerA)
	k := stepKey(run, "loop.iter_0", "set")
	mark := h.lastEventID(run.ID)
	done := func(try int) error {
		return h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: k, Lease: l, Try: try, Kind: "context_set",
			WithStart: true, Output: json.RawMessage(`{"x":1}`), Context: json.RawMessage(`{"x":1}`)})
	}
	if err := done(1); err != nil {
		t.Fatalf("OnNodeComplete WithStart: %v", err)
	}
	st := h.step(k)
	equal(t, "status", st.Status, starflowtype.StepSucceeded)
	equal(t, "tries", st.Tries, 1)
	equal(t, "kind", st.Kind, "context_set")
	if st.StartedAt.IsZero() || st.FinishedAt.IsZero() {
		t.Errorf("started_at %v, finished_at %v: want both set", st.StartedAt, st.FinishedAt)
	}
	evs := h.eventsAfter(run.ID, mark)
	wantEventTypes(t, evs, starflowtype.EventNodeStart, starflowtype.EventNodeComplete)
	for _, e := range evs {
		wantTry(t, e, 1)
		equal(t, string(e.Type)+" scope_path", e.ScopePath, "loop.iter_0")
	}
	cps := h.checkpoints(run.ID, 0)
	if len(cps) != 1 || string(cps[0].Output) != `{"x":1}` {
		t.Fatalf("checkpoints = %s, want the step's one", dump(cps))
	}
	// A succeeded step is final: the same try again is a conflict and
	// writes nothing.
	before := h.snapshot(run.ID)
	wantErrIs(t, "WithStart on a succeeded step", done(2), starflowtype.ErrConflict)
	sameSnapshot(t, "WithStart on a succeeded step", before, h.snapshot(run.ID))

	// A try that was started and failed is continued by the next try.
	k2 := stepKey(run, "", "again")
	h.nodeStart(k2, l, 1)
	if err := h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: k2, Lease: l, Try: 1, Error: "timeout"}); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, "WithStart of try 1 again", h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: k2, Lease: l, Try: 1,
		Kind: "context_set", WithStart: true}), starflowtype.ErrConflict)
	if err := h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: k2, Lease: l, Try: 2, Kind: "context_set", WithStart: true}); err != nil {
		t.Fatalf("WithStart of try 2: %v", err)
	}
	equal(t, "tries of the retried step", h.step(k2).Tries, 2)

	// A cancel request refuses it, as it refuses OnNodeStart.
	if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: run.ID}); err != nil {
		t.Fatal(err)
	}
	before = h.snapshot(run.ID)
	err := h.a.OnNodeComplete(h.ctx(), &state.NodeCompleteParams{StepKey: stepKey(run, "", "late"), Lease: l, Try: 1, Kind: "context_set", WithStart: true})
	wantErrIs(t, "WithStart after a cancel request", err, starflowtype.ErrCancelRequested)
	sameSnapshot(t, "WithStart after a cancel request", before, h.snapshot(run.ID))
}

// testGroupCommit: step writes of many runs made at the same moment all
// commit, each run's fenced on its own lease: a stale lease among them
// writes nothing for its run and fails no other write. (Whether they were
// committed together depends on timing; GroupCommitStats is logged, and
// internal/storecore tests the batching itself deterministically.)
func (s *suite) testGroupCommit(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	const runs, steps = 24, 8
	type live struct {
		run   *starflowtype.Run
		lease starflowtype.Lease
	}
	var all []live
	for range runs {
		r, l := h.started(nil, runnerA)
		all = append(all, live{r, l})
	}
	// The last run's lease goes stale: another claim bumps its epoch.
	stale := all[runs-1]
	if err := h.a.ClearLease(h.ctx(), &state.ClearLeaseParams{RunID: stale.run.ID, Lease: stale.lease}); err != nil {
		t.Fatal(err)
	}
	h.claimAndStart(stale.run.ID, runnerB)
	before := h.snapshot(stale.run.ID)
	var b0, w0 int64
	gc, counts := h.a.(GroupCommitter)
	if counts {
		b0, w0 = gc.GroupCommitStats()
	}

	var wg sync.WaitGroup
	errs := make([][]error, runs)
	for i, r := range all {
		errs[i] = make([]error, steps)
		wg.Go(func() {
			for j := range steps {
				k := stepKey(r.run, "", fmt.Sprintf("s%d", j))
				p := &state.NodeCompleteParams{StepKey: k, Lease: r.lease, Try: 1, Kind: "context_set", WithStart: j%2 == 0,
					Output: json.RawMessage(fmt.Sprint(j)), Context: json.RawMessage(fmt.Sprintf(`{"n%d":%d}`, j, j))}
				if !p.WithStart {
					if err := h.a.OnNodeStart(h.ctx(), &state.NodeStartParams{StepKey: k, Lease: r.lease, Kind: "context_set", Try: 1}); err != nil {
						errs[i][j] = err
						continue
					}
				}
				errs[i][j] = h.a.OnNodeComplete(h.ctx(), p)
			}
		})
	}
	wg.Wait()
	for i, r := range all {
		for j, err := range errs[i] {
			switch {
			case i == runs-1:
				if !errors.Is(err, starflowtype.ErrLeaseLost) {
					t.Errorf("stale run, step %d: %v, want ErrLeaseLost", j, err)
				}
			case err != nil:
				t.Errorf("run %d step %d: %v", i, j, err)
			}
		}
		if i == runs-1 {
			continue
		}
		cps := h.checkpoints(r.run.ID, 0)
		equal(t, fmt.Sprintf("checkpoints of run %d", i), len(cps), steps)
		for _, st := range h.steps(r.run.ID, 0) {
			if st.Status != starflowtype.StepSucceeded {
				t.Errorf("run %d: step %s is %s, want succeeded", i, st.StepID, st.Status)
			}
		}
		complete := 0
		for _, e := range h.events(r.run.ID) {
			if e.Type == starflowtype.EventNodeComplete {
				complete++
			}
		}
		equal(t, fmt.Sprintf("node_complete events of run %d", i), complete, steps)
	}
	sameSnapshot(t, "the stale run after the batch", before, h.snapshot(stale.run.ID))
	if counts {
		b1, w1 := gc.GroupCommitStats()
		batches, writes := b1-b0, w1-w0
		t.Logf("group commit: %d writes in %d batches", writes, batches)
		if writes > 0 && writes < runs*steps { // 0: this store commits each write alone
			t.Errorf("GroupCommitStats: %d writes in %d batches; want at least the %d step completions", writes, batches, runs*steps)
		}
	}
}
