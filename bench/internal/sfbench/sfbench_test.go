package sfbench

import (
	"cmp"
	"context"
	"os"
	"testing"
	"time"

	"github.com/starflow/starflow/bench/internal/workload"
)

// pgURL returns the test database, skipping when it is unreachable
// (failing under CI=true).
func pgURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("STARFLOW_TEST_PG_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := workload.PGConnect(ctx, u)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	conn.Close(ctx)
	return u
}

func TestRunCountsEveryStep(t *testing.T) {
	stores := []workload.RunConfig{
		{Store: workload.StoreSQLite, Sync: workload.SyncFull},
		{Store: workload.StoreSQLite, Sync: workload.SyncNormal},
		{Store: workload.StorePG},
	}
	for _, rc := range stores {
		t.Run(rc.Store+rc.Sync, func(t *testing.T) {
			if rc.Store == workload.StorePG {
				rc.PGURL = pgURL(t)
			}
			rc.Concurrency, rc.Runs, rc.Dir = 3, 7, t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, rc)
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps != 70 || res.Elapsed <= 0 {
				t.Fatalf("got %d steps in %v, want 70", res.Steps, res.Elapsed)
			}
		})
	}
}

func TestLatencyMeasuresEveryRun(t *testing.T) {
	rc := workload.RunConfig{Concurrency: 4, Store: workload.StoreSQLite, Sync: workload.SyncNormal, Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := Latency(ctx, rc, 50, 400*time.Millisecond, 2)
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	if l.Runs != 20 || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 {
		t.Fatalf("got %+v, want 20 runs with 0 < p50 ≤ p99 ≤ max", l)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p := percentile(d, 0.50); p != 50 {
		t.Fatalf("p50 of 1..100 = %d", p)
	}
	if p := percentile(d, 0.99); p != 99 {
		t.Fatalf("p99 of 1..100 = %d", p)
	}
	if p := percentile(d[:1], 0.99); p != 1 {
		t.Fatalf("p99 of one sample = %d", p)
	}
}

// BenchmarkRun is one side-by-side measurement of Starflow, for profiling
// (go test -bench Run -benchtime 1x -cpuprofile …): SBS_STORE postgres or
// sqlite (default), SBS_SYNC (SQLite, default NORMAL), c = 16, 1,600 runs;
// PostgreSQL at STARFLOW_TEST_PG_URL, else the local test database.
func BenchmarkRun(b *testing.B) {
	rc := workload.RunConfig{Concurrency: 16, Runs: 1600, Store: workload.StoreSQLite, Sync: workload.SyncNormal, Dir: b.TempDir(), PGConns: 20}
	if os.Getenv("SBS_STORE") == "postgres" {
		rc.Store, rc.Sync = workload.StorePG, ""
		rc.PGURL = cmp.Or(os.Getenv("STARFLOW_TEST_PG_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	} else if s := os.Getenv("SBS_SYNC"); s != "" {
		rc.Sync = s
	}
	for b.Loop() {
		res, err := Run(context.Background(), rc)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Steps)/res.Elapsed.Seconds(), "steps/s")
		b.Log(res.Checked)
	}
}
