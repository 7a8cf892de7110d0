package pgstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// TestManyStartSucceed: the StepStartSucceed writes of one batch share
// one statement, and each is still fenced and judged on its own: two
// writes of one run, a stale lease (nothing written for that run), a run
// with a cancel request the write must refuse, a write with a blob, an id
// no run can have; then the same with whole run rows (WantRun).
func TestManyStartSucceed(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t), nil)
	ctx := t.Context()
	start := func() (*starflowtype.Run, starflowtype.Lease) { return startedRun(t, s) }
	blob := []byte(`"a large value"`)
	sum := sha256.Sum256(blob)
	blobSum := hex.EncodeToString(sum[:])
	write := func(r *starflowtype.Run, l starflowtype.Lease, step string, wantRun bool) *storecore.StepWrite {
		return &storecore.StepWrite{Op: storecore.StepStartSucceed, RefuseCancelled: true, WantRun: wantRun,
			Key: state.StepKey{RunID: r.ID, Attempt: r.Attempt, StepID: step}, Lease: l, Kind: "context_set", Try: 1,
			Events: []storecore.EventIn{{Type: starflowtype.EventNodeStart, Payload: json.RawMessage(`{"try":1}`)},
				{Type: starflowtype.EventNodeComplete, Payload: json.RawMessage(fmt.Sprintf(`{"step":%q}`, step))}},
			Checkpoint: &storecore.CheckpointIn{Context: []byte(fmt.Sprintf(`{%q:1}`, step)), Output: []byte(`1`)}}
	}
	for _, wantRun := range []bool{false, true} {
		t.Run(fmt.Sprintf("WantRun=%v", wantRun), func(t *testing.T) {
			a, la := start()
			stale, ls := start()
			ls.Epoch-- // an older claim's lease
			cancelled, lc := start()
			if _, err := s.CancelRun(ctx, &state.CancelRunParams{RunID: cancelled.ID}); err != nil {
				t.Fatal(err)
			}
			b, lb := start()
			withBlob := write(b, lb, "big", wantRun)
			withBlob.Blobs = []storecore.Blob{{Sum: blobSum, Data: blob}}
			withBlob.Checkpoint.Output, withBlob.Checkpoint.OutputBlob = []byte(`{"$blob":"`+blobSum+`"}`), blobSum
			bogus := write(a, la, "bogus", wantRun)
			bogus.Key.RunID = "not-a-uuid"
			ws := []*storecore.StepWrite{write(a, la, "one", wantRun), write(stale, ls, "x", wantRun), bogus,
				write(cancelled, lc, "late", wantRun), write(a, la, "two", wantRun), withBlob}
			if err := pgstore.StepWritesInTx(ctx, s, nil, ws); err != nil {
				t.Fatal(err)
			}
			for i, want := range []struct{ fenced, cancel, changed bool }{
				{true, false, true}, {false, false, false}, {false, false, false}, {true, true, false}, {true, false, true}, {true, false, true},
			} {
				w := ws[i]
				if w.Fenced != want.fenced || w.Cancel != want.cancel || w.Changed != want.changed {
					t.Errorf("write %d (%s): fenced %v cancel %v changed %v, want %v %v %v", i, w.Key.StepID,
						w.Fenced, w.Cancel, w.Changed, want.fenced, want.cancel, want.changed)
				}
				if !w.Changed {
					continue
				}
				if w.Step == nil || w.Step.StepID != w.Key.StepID || w.Step.Status != starflowtype.StepSucceeded || w.Step.Tries != 1 {
					t.Errorf("write %d: step row %+v", i, w.Step)
				}
				if w.Run == nil || w.Run.ID != w.Key.RunID || w.Run.WorkspaceID != state.DefaultWorkspace {
					t.Errorf("write %d: run %+v", i, w.Run)
				} else if wantRun && (w.Run.Status != starflowtype.RunRunning || w.Run.LeasedBy != "runner-a" || w.Run.UpdatedAt.IsZero()) {
					t.Errorf("write %d: whole run row %+v", i, w.Run)
				}
				if len(w.EventIDs) != 2 || w.EventIDs[0] >= w.EventIDs[1] || w.EventsAt.IsZero() {
					t.Errorf("write %d: event ids %v at %v", i, w.EventIDs, w.EventsAt)
				}
			}
			if ws[0].EventIDs[1] >= ws[4].EventIDs[0] {
				t.Errorf("events of run a's writes out of batch order: %v then %v", ws[0].EventIDs, ws[4].EventIDs)
			}
			for _, c := range []struct {
				run   *starflowtype.Run
				steps []string
			}{{a, []string{"one", "two"}}, {stale, nil}, {cancelled, nil}, {b, []string{"big"}}} {
				steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: c.run.ID})
				if err != nil {
					t.Fatal(err)
				}
				cps, err := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: c.run.ID})
				if err != nil {
					t.Fatal(err)
				}
				evs, err := s.ListEvents(ctx, &state.ListEventsParams{RunID: c.run.ID})
				if err != nil {
					t.Fatal(err)
				}
				var nodeEvents []string
				for _, e := range evs {
					if e.NodeID != "" {
						nodeEvents = append(nodeEvents, string(e.Type)+":"+e.NodeID)
					}
				}
				var want []string
				for _, st := range c.steps {
					want = append(want, "node_start:"+st, "node_complete:"+st)
				}
				if len(steps) != len(c.steps) || len(cps) != len(c.steps) || fmt.Sprint(nodeEvents) != fmt.Sprint(want) {
					t.Errorf("run %s: %d step rows, %d checkpoints, node events %v; want %d, %d, %v", c.run.ID,
						len(steps), len(cps), nodeEvents, len(c.steps), len(c.steps), want)
				}
			}
			var n int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM workflow_blobs WHERE sha256 = $1 AND data = $2`, blobSum, blob).Scan(&n); err != nil || n != 1 {
				t.Errorf("blob rows: %d, %v; want 1", n, err)
			}
		})
	}
}

// TestStepWritesUpdateRunsInPlace: a step write's fence (workflow_runs
// updated_at) is a heap-only update: no index of workflow_runs covers a
// column step writes change, so PostgreSQL adds no index entry per step
// (decision 237). Checked on the catalog and on the statistics of a
// transaction of three batches.
func TestStepWritesUpdateRunsInPlace(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t), nil)
	ctx := t.Context()
	rows, err := s.Pool().Query(ctx, `SELECT i.indexrelid::regclass::text FROM pg_index i
		 WHERE i.indrelid = 'workflow_runs'::regclass
		   AND (pg_get_indexdef(i.indexrelid) LIKE '%updated_at%' OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') LIKE '%updated_at%')`)
	if err != nil {
		t.Fatal(err)
	}
	covering, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(covering) > 0 {
		t.Errorf("indexes of workflow_runs covering updated_at (every step write then updates every index): %v", covering)
	}

	r, l := startedRun(t, s)
	write := func(step string) *storecore.StepWrite {
		return &storecore.StepWrite{Op: storecore.StepStartSucceed,
			Key: state.StepKey{RunID: r.ID, Attempt: r.Attempt, StepID: step}, Lease: l, Kind: "context_set", Try: 1,
			Events:     []storecore.EventIn{{Type: starflowtype.EventNodeStart}, {Type: starflowtype.EventNodeComplete}},
			Checkpoint: &storecore.CheckpointIn{Context: []byte(`{}`), Output: []byte(`1`)}}
	}
	// Three batches of one write (the one-write statement), then one of
	// two (the array statement), on a table of one run.
	batches := [][]*storecore.StepWrite{{write("s0")}, {write("s1")}, {write("s2")}, {write("s3"), write("s4")}}
	// The statistics of the transaction: what the backend has counted and
	// not yet reported, so the difference across the batches is theirs.
	var upd, hot, scans []int64
	err = pgstore.StepWritesInTx(ctx, s, func(tx storecore.Conn) error {
		var u, h, n int64
		err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd, seq_scan FROM pg_stat_xact_user_tables
			 WHERE relid = 'workflow_runs'::regclass`).Scan(&u, &h, &n)
		upd, hot, scans = append(upd, u), append(hot, h), append(scans, n)
		return err
	}, batches...)
	if err != nil {
		t.Fatal(err)
	}
	// The array statement updates a run once for all its writes.
	if u, h := upd[1]-upd[0], hot[1]-hot[0]; u != 4 || h != 4 {
		t.Errorf("four batches of one run: %d updates of workflow_runs, %d of them heap-only; want 4, 4", u, h)
	}
	// A batch's transaction plans with TxOptions.ByKey: on a table of a
	// page, PostgreSQL would otherwise scan it to find the runs.
	if n := scans[1] - scans[0]; n != 0 {
		t.Errorf("the step writes scanned workflow_runs %d times; want it read by key only", n)
	}
	for _, b := range batches {
		for _, w := range b {
			if !w.Changed {
				t.Errorf("%s not written", w.Key.StepID)
			}
		}
	}
}

// startedRun enqueues a run, claims it for runner-a and starts it.
func startedRun(t *testing.T, s *pgstore.Store) (*starflowtype.Run, starflowtype.Lease) {
	t.Helper()
	ctx := t.Context()
	r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{ID: uuid.NewString(), WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "runner-a", LeaseTTL: time.Minute, RunID: r.ID})
	if err != nil || c == nil {
		t.Fatalf("claim: %v, %v", c, err)
	}
	l := starflowtype.Lease{RunnerID: "runner-a", Epoch: c.LeaseEpoch}
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: r.ID, Lease: l}); err != nil {
		t.Fatal(err)
	}
	return c, l
}
