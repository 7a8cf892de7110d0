package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/state/pgstore"
)

// BenchmarkRunsPage times the runs page in headless Chromium against
// PostgreSQL holding STARFLOW_BENCH_RUNS runs (default 10,000;
// docs/benchmarks.md reports 1,000,000, filled by pgtest.FillRuns): from
// the navigation's start until the page has drawn its table (the page's
// own performance.now() when it sets main[data-ready]): the HTML, the
// script, GET /api/me, /api/workflows and /api/runs (with each run's
// stuck reason), and the DOM. It reports p50 and p95 in ms of the first
// page and of a status-filtered page over b.N loads.
//
//	STARFLOW_BENCH_RUNS=1000000 go test -run '^$' -bench BenchmarkRunsPage -benchtime 50x ./internal/dashboard/e2e/
func BenchmarkRunsPage(b *testing.B) {
	n := 10000
	if v := os.Getenv("STARFLOW_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("STARFLOW_BENCH_RUNS=%q: want a number of runs, at least 1000", v)
		}
	}
	pgtest.Require(b)
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	schema := "sf_dash_" + hex.EncodeToString(rb[:])
	store, err := pgstore.Open(context.Background(), pgstore.Config{URL: pgtest.URL(), Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = store.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		store.Close()
	})
	if err := store.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	pgtest.FillRuns(b, func(ctx context.Context, sql string, args ...any) error {
		_, err := store.Pool().Exec(ctx, sql, args...)
		return err
	}, n)
	eng, err := starflow.New(starflow.Config{Store: store, NoRunner: true})
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpserver.New(httpserver.Config{Backend: eng, API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := browser(b)
	for _, c := range []struct{ name, query string }{
		{"FirstPage", ""},
		{"StatusFailed", "?status=failed"},
	} {
		b.Run(c.name, func(b *testing.B) {
			load := func() float64 {
				run(b, ctx, "load the runs page", chromedp.Navigate(srv.URL+"/runs"+c.query),
					chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
				if rows := count(b, ctx, `tbody tr[data-run]`); rows != 50 {
					b.Fatalf("runs page: %d rows, want 50", rows)
				}
				return eval[float64](b, ctx, `Number(document.querySelector('main').dataset.drawnMs)`)
			}
			load() // warm the connection pool, the prepared statements, the browser's cache
			lat := make([]float64, 0, b.N)
			b.ResetTimer()
			for range b.N {
				lat = append(lat, load())
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) float64 { return lat[int(p*float64(len(lat)-1))] }
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
		})
	}
}
