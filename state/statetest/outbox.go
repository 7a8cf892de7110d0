package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// outboxHook appends one mirror_outbox row (kind run, payload {"op": …})
// for every write that names a run, in the write's transaction, and
// fails after inserting when the op is failOp.
func outboxHook(failOp state.Op) state.TxHook {
	return func(ctx context.Context, tx state.HookTx, ch *state.Change) error {
		if ch.RunID == "" {
			return nil
		}
		p, _ := json.Marshal(map[string]string{"op": string(ch.Op)})
		if err := tx.AppendOutbox(ctx, []*state.OutboxRow{{RunID: ch.RunID, Kind: state.OutboxKindRun, Payload: p}}); err != nil {
			return err
		}
		if ch.Op == failOp {
			return errors.New("statetest: hook fails on purpose")
		}
		return nil
	}
}

// testOutbox: state.Outbox on an adapter whose hook appends rows. A write
// whose hook fails leaves no row; rows drain in id order, a run's in
// write order; only the ids apply returns are marked; stats count the
// unapplied rows by age; MirrorRuns reports versions and pending counts;
// prune removes applied rows past the retention only.
func (s *suite) testOutbox(t *testing.T) {
	h := s.stored(t, outboxHook("CancelRun"))
	ob, ok := h.a.(state.Outbox)
	if !ok {
		t.Skip("statetest: the adapter does not implement state.Outbox")
	}
	ctx := h.ctx()
	a := h.enqueue(nil)
	b := h.enqueue(nil)
	if _, err := h.a.CancelRun(ctx, &state.CancelRunParams{RunID: a.ID}); err == nil {
		t.Fatal("CancelRun with a failing hook succeeded, want the hook's error")
	}
	if r, err := h.a.GetRun(ctx, &state.GetRunParams{ID: a.ID}); err != nil || r.Status != "queued" {
		t.Fatalf("run after the rolled-back cancel: %+v, %v; want queued", r, err)
	}
	if _, err := h.a.RequeueRun(ctx, &state.RequeueRunParams{RunID: a.ID, Reason: "retrigger"}); err == nil {
		t.Fatal("RequeueRun of a queued run succeeded, want a conflict") // writes nothing, no row
	}
	// A third write for a: claim (the best run is a or b; claim by id).
	c, err := h.a.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: runnerA, LeaseTTL: leaseTTL, RunID: a.ID})
	if err != nil || c == nil {
		t.Fatalf("ClaimRun(%s) = %v, %v", a.ID, c, err)
	}

	st, err := ob.OutboxStats(ctx, &state.OutboxStatsParams{Bounds: []time.Duration{time.Hour}})
	if err != nil {
		t.Fatalf("OutboxStats: %v", err)
	}
	if st.Pending != 3 || len(st.Buckets) != 2 || st.Buckets[0] != 3 || st.Buckets[1] != 0 || st.Estimated {
		t.Fatalf("OutboxStats = %+v, want 3 pending, all younger than 1 h, exact", st)
	}
	if st.OldestAge < 0 || st.OldestAge > time.Minute {
		t.Fatalf("OutboxStats.OldestAge = %v, want between 0 and 1 min", st.OldestAge)
	}

	type seen struct{ run, op string }
	var got []seen
	var ids []int64
	record := func(limit int, err error) state.OutboxApplyFunc {
		return func(_ context.Context, rows []*state.OutboxRow) ([]int64, error) {
			var done []int64
			for _, r := range rows {
				if len(done) == limit {
					return done, err
				}
				var p struct{ Op string }
				if e := json.Unmarshal(r.Payload, &p); e != nil {
					t.Errorf("row %d payload %s: %v", r.ID, r.Payload, e)
				}
				if r.Kind != state.OutboxKindRun || r.CreatedAt.IsZero() {
					t.Errorf("row %+v: want kind run and a created_at", r)
				}
				got = append(got, seen{r.RunID, p.Op})
				ids = append(ids, r.ID)
				done = append(done, r.ID)
			}
			return done, nil
		}
	}
	// One row applied, then a failure: the rest stay unapplied.
	boom := errors.New("warm down")
	n, err := ob.DrainOutbox(ctx, &state.DrainOutboxParams{Limit: 10}, record(1, boom))
	if n != 1 || !errors.Is(err, boom) {
		t.Fatalf("DrainOutbox with a failing apply = %d, %v; want 1, the apply error", n, err)
	}
	n, err = ob.DrainOutbox(ctx, &state.DrainOutboxParams{Limit: 10}, record(-1, nil))
	if n != 2 || err != nil {
		t.Fatalf("DrainOutbox = %d, %v; want the 2 remaining rows", n, err)
	}
	want := []seen{{a.ID, "EnqueueRun"}, {b.ID, "EnqueueRun"}, {a.ID, "ClaimRun"}}
	if !slices.Equal(got, want) {
		t.Fatalf("drained %v, want %v (id order, the rolled-back cancel absent)", got, want)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("drained ids %v, want ascending", ids)
	}
	if n, err := ob.DrainOutbox(ctx, &state.DrainOutboxParams{}, record(-1, nil)); n != 0 || err != nil {
		t.Fatalf("DrainOutbox of an applied outbox = %d, %v; want 0, nil", n, err)
	}
	st, err = ob.OutboxStats(ctx, &state.OutboxStatsParams{})
	if err != nil || st.Pending != 0 || st.OldestAge != 0 {
		t.Fatalf("OutboxStats after draining = %+v, %v; want none pending", st, err)
	}

	mrs, err := ob.MirrorRuns(ctx, &state.MirrorRunsParams{FinishedWithin: time.Hour})
	if err != nil {
		t.Fatalf("MirrorRuns: %v", err)
	}
	var runs []string
	for _, m := range mrs {
		runs = append(runs, m.RunID)
		if m.Pending != 0 || m.Version != 0 {
			t.Errorf("MirrorRuns: %+v, want version 0 (the test hook bumps none) and none pending", m)
		}
	}
	wantRuns := []string{a.ID, b.ID}
	slices.Sort(wantRuns)
	if !slices.Equal(runs, wantRuns) {
		t.Fatalf("MirrorRuns = %v, want %v (non-terminal runs, by id)", runs, wantRuns)
	}
	if mrs, err := ob.MirrorRuns(ctx, &state.MirrorRunsParams{FinishedWithin: time.Hour, AfterID: wantRuns[0]}); err != nil || len(mrs) != 1 || mrs[0].RunID != wantRuns[1] {
		t.Fatalf("MirrorRuns after %s = %v, %v; want only %s", wantRuns[0], mrs, err, wantRuns[1])
	}
	if mrs, err := ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{b.ID, "no-such-run"}}); err != nil || len(mrs) != 1 || mrs[0].RunID != b.ID {
		t.Fatalf("MirrorRuns(RunIDs) = %v, %v; want only %s", mrs, err, b.ID)
	}

	if n, err := ob.PruneOutbox(ctx, &state.PruneOutboxParams{OlderThan: time.Hour}); n != 0 || err != nil {
		t.Fatalf("PruneOutbox(1 h) = %d, %v; want 0 (the rows were applied just now)", n, err)
	}
	time.Sleep(20 * time.Millisecond)
	if n, err := ob.PruneOutbox(ctx, &state.PruneOutboxParams{OlderThan: 10 * time.Millisecond}); n != 3 || err != nil {
		t.Fatalf("PruneOutbox(10 ms) = %d, %v; want the 3 applied rows", n, err)
	}
}
