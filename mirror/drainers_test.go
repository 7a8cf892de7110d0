package mirror_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm/memory"
)

// TestThreeDrainersPostgres: three drainers (three connection pools, as
// three processes would have) drain one PostgreSQL outbox while twenty
// writers run runs concurrently: every run row is applied exactly once,
// each run's rows in version order, and the warm tier ends equal to cold.
func TestThreeDrainersPostgres(t *testing.T) {
	schema := newSchema(t)
	w := openPG(t, schema, []state.TxHook{mirror.Hook()})
	rec := &recorder{Store: memory.New()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var mets []*mirror.Metrics
	for range 3 {
		d := openPG(t, schema, nil)
		met, _ := mirror.NewMetrics(nil)
		mets = append(mets, met)
		dr := mirror.NewDrainer(d, mirror.Config{Warm: rec, PollInterval: 2 * time.Millisecond, BatchSize: 16}, met)
		wg.Go(func() { dr.Run(ctx) })
	}
	var (
		mu   sync.Mutex
		ids  []string
		errs []error
		ww   sync.WaitGroup
	)
	for range 20 {
		ww.Go(func() {
			for range 3 {
				r, err := execRunE(w, 4)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					ids = append(ids, r.ID)
				}
				mu.Unlock()
			}
		})
	}
	ww.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	eventually(t, "the outbox to drain", func() bool { return pending(t, w) == 0 })

	// The run rows as written, per run in id order.
	conn, err := pgx.Connect(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT run_id, version FROM `+pgx.Identifier{schema, "mirror_outbox"}.Sanitize()+
		` WHERE kind = 'run' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string][]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		written[id] = append(written[id], v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(written) != 60 {
		t.Fatalf("%d runs have outbox rows, want 60", len(written))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, vs := range written {
		if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
			t.Fatalf("run %s: outbox versions %v in id order, want strictly increasing", id, vs)
		}
		if got := rec.runs[id]; !slices.Equal(got, vs) {
			t.Fatalf("run %s: warm PutRun versions %v, want %v (each row once, in order)", id, got, vs)
		}
	}
	for _, id := range ids {
		if !matches(t, w, rec.Store, id) {
			t.Fatalf("warm entry of %s does not match cold", id)
		}
	}
	for i, met := range mets {
		t.Logf("drainer %d applied %.0f rows", i, testutilValue(met))
	}
}

// TestConcurrentWritersOneRunPostgres: concurrent writes to one run on
// PostgreSQL get their outbox rows in version order (the hook's version
// bump takes the run's row lock before it inserts), and the versions are
// exactly 1..mirror_version.
func TestConcurrentWritersOneRunPostgres(t *testing.T) {
	schema := newSchema(t)
	c := openPG(t, schema, []state.TxHook{mirror.Hook()})
	ctx := context.Background()
	r, err := c.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	r = startRun(t, c, r.ID)
	var ww sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := range 8 {
		ww.Go(func() {
			for i := range 20 {
				errs <- c.RecordPhaseIfChanged(ctx, &state.RecordPhaseParams{RunID: r.ID, Lease: r.Lease(), Phase: fmt.Sprintf("g%d-%d", g, i)})
			}
		})
	}
	ww.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows := unapplied(t, c)
	var versions []int64
	for _, row := range rows {
		if row.Kind == state.OutboxKindRun {
			versions = append(versions, row.Version)
		}
	}
	mrs, err := c.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{r.ID}})
	if err != nil || len(mrs) != 1 {
		t.Fatalf("MirrorRuns = %v, %v", mrs, err)
	}
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("run row versions in id order = %v, want 1..%d without gaps or reordering", versions, mrs[0].Version)
		}
	}
	if int64(len(versions)) != mrs[0].Version {
		t.Fatalf("%d run rows, mirror_version %d", len(versions), mrs[0].Version)
	}
}
