package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// fillOutbox inserts applied rows and then unapplied ones into
// mirror_outbox, 1000 runs round robin, the unapplied ones created one
// millisecond apart ending now, the newest last.
func fillOutbox(t *testing.T, s *pgstore.Store, applied, unapplied int) {
	t.Helper()
	_, err := s.Pool().Exec(t.Context(), `
INSERT INTO mirror_outbox (run_id, kind, payload, version, created_at, applied_at)
SELECT 'run-' || (i % 1000), 'step', '{}', i, now() - interval '2 hours', now() - interval '1 hour'
  FROM generate_series(1, $1) AS i`, applied)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(t.Context(), `
INSERT INTO mirror_outbox (run_id, kind, payload, version, created_at)
SELECT 'run-' || (i % 1000), 'step', '{}', i, now() - ($1 - i) * interval '1 millisecond'
  FROM generate_series(1, $1) AS i`, unapplied)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(t.Context(), `ANALYZE mirror_outbox`); err != nil {
		t.Fatal(err)
	}
}

// explainJSON is EXPLAIN (FORMAT JSON[, ANALYZE]) of query, and its
// execution time (ms, with analyze).
func explainJSON(t *testing.T, s *pgstore.Store, analyze bool, query string, args ...any) (json.RawMessage, float64) {
	t.Helper()
	opts := "FORMAT JSON"
	if analyze {
		opts += ", ANALYZE"
	}
	var plan json.RawMessage
	if err := s.Pool().QueryRow(t.Context(), "EXPLAIN ("+opts+") "+query, args...).Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	var top []struct {
		ExecutionTime float64 `json:"Execution Time"`
	}
	_ = json.Unmarshal(plan, &top)
	if len(top) == 1 {
		return plan, top[0].ExecutionTime
	}
	return plan, 0
}

// TestOutboxPlans: with 100 000 applied and 200 000 unapplied rows, the
// drain pass's run listing and OutboxStats walk the partial index
// mirror_outbox_unapplied under a limit, and never scan the table.
func TestOutboxPlans(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	fillOutbox(t, s, 100000, 200000)
	for _, q := range []struct {
		name  string
		query string
		args  []any
	}{
		{"drain rows", pgstore.Query("outbox_unapplied"), []any{500}},
		{"stats window", pgstore.Query("outbox_window"), []any{pgstore.OutboxStatsExact}},
		{"stats buckets", pgstore.Query("outbox_buckets"), []any{pgstore.OutboxStatsExact, []float64{1, 2, 30}}},
	} {
		plan, ms := explainJSON(t, s, true, q.query, q.args...)
		indexes, nodes := planIndexes(t, plan)
		t.Logf("%s: %.2f ms; nodes %v, indexes %v", q.name, ms, nodes, indexes)
		if !slices.Contains(indexes, "mirror_outbox_unapplied") {
			t.Errorf("%s does not use mirror_outbox_unapplied:\n%s", q.name, plan)
		}
		if slices.Contains(nodes, "Seq Scan") || slices.Contains(nodes, "Bitmap Heap Scan") {
			t.Errorf("%s scans the table:\n%s", q.name, plan)
		}
		if !slices.Contains(nodes, "Limit") {
			t.Errorf("%s reads the index without a limit:\n%s", q.name, plan)
		}
	}
	// For the report: the former statements on the same data.
	_, ms := explainJSON(t, s, true, `SELECT count(*), max(extract(epoch FROM clock_timestamp() - created_at)) FROM mirror_outbox WHERE applied_at IS NULL`)
	t.Logf("former stats (one full count): %.2f ms", ms)

	// The statements work on this data: a pass drains the oldest rows
	// first.
	n, err := s.DrainOutbox(t.Context(), &state.DrainOutboxParams{Limit: 10}, func(_ context.Context, rows []*state.OutboxRow) ([]int64, error) {
		if rows[0].Version != 1 {
			t.Errorf("first drained row has version %d; want the oldest (1)", rows[0].Version)
		}
		ids := []int64{}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids, nil
	})
	if err != nil || n != 10 {
		t.Fatalf("DrainOutbox on the filled table = %d, %v; want 10", n, err)
	}
}

// TestOutboxStatsBounded: up to pgstore.OutboxStatsExact unapplied rows
// the stats are exact; beyond, Pending is estimated from the id span (here
// exact: the ids are contiguous), the rows not read are counted in the
// oldest row's bucket, the buckets still sum to Pending, and OldestAge is
// exact.
func TestOutboxStatsBounded(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	const total = pgstore.OutboxStatsExact + 2000
	fillOutbox(t, s, 0, total)
	// The 100 oldest rows are an hour old.
	if _, err := s.Pool().Exec(t.Context(), `UPDATE mirror_outbox SET created_at = now() - interval '1 hour'
WHERE id IN (SELECT id FROM mirror_outbox ORDER BY id LIMIT 100)`); err != nil {
		t.Fatal(err)
	}
	bounds := []time.Duration{time.Second, 2 * time.Second, 30 * time.Second}
	check := func(want int64, estimated bool) *state.OutboxStats {
		t.Helper()
		st, err := s.OutboxStats(t.Context(), &state.OutboxStatsParams{Bounds: bounds})
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, b := range st.Buckets {
			sum += b
		}
		if st.Pending != want || st.Estimated != estimated || sum != want || len(st.Buckets) != 4 {
			t.Fatalf("OutboxStats = %+v; want %d pending (estimated %v) in 4 buckets summing to it", st, want, estimated)
		}
		if st.OldestAge < 59*time.Minute || st.OldestAge > 61*time.Minute {
			t.Fatalf("OutboxStats.OldestAge = %v; want the hour-old row's age", st.OldestAge)
		}
		return st
	}
	st := check(total, true)
	if st.Buckets[3] < 2000 {
		t.Fatalf("OutboxStats.Buckets = %v; want the rows not read in the oldest bucket", st.Buckets)
	}
	// Applied rows fall out; under the bound the counts are exact.
	if _, err := s.Pool().Exec(t.Context(), `UPDATE mirror_outbox SET applied_at = now()
WHERE id IN (SELECT id FROM mirror_outbox ORDER BY id OFFSET 100 LIMIT 3000)`); err != nil {
		t.Fatal(err)
	}
	st = check(total-3000, false)
	if st.Buckets[3] < 100 {
		t.Fatalf("OutboxStats.Buckets = %v; want the 100 hour-old rows at least 30 s old", st.Buckets)
	}
}
