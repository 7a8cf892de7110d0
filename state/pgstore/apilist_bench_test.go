package pgstore_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/state"
)

// BenchmarkAPIListRuns times GET /api/runs through the HTTP API (huma
// handler, auth middleware, store) on PostgreSQL filled by fillListing
// with STARFLOW_BENCH_RUNS runs (default 10,000; docs/benchmarks.md
// reports 1,000,000): the first page, a page after a cursor 60% deep
// into workspace default, and a status-filtered page (failed). It
// reports each shape's p50 and p95 in ms over b.N requests.
//
//	STARFLOW_BENCH_RUNS=1000000 go test -run '^$' -bench BenchmarkAPIListRuns -benchtime 400x ./state/pgstore/
func BenchmarkAPIListRuns(b *testing.B) {
	n := 10000
	if v := os.Getenv("STARFLOW_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("STARFLOW_BENCH_RUNS=%q: want a number of runs, at least 1000", v)
		}
	}
	s := fresh(b)
	fillListing(b, s, n)
	eng, err := starflow.New(starflow.Config{Store: s, NoRunner: true})
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpserver.New(httpserver.Config{Backend: eng, API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var deep state.RunCursor
	if err := s.Pool().QueryRow(b.Context(), `SELECT created_at, id::text FROM workflow_runs WHERE workspace_id = 'default'
		ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1`, n*8/10*6/10).Scan(&deep.CreatedAt, &deep.ID); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, query string }{
		{"FirstPage", "limit=50"},
		{"DeepCursor", "limit=50&cursor=" + httpserver.EncodeCursor(&deep)},
		{"StatusFailed", "limit=50&status=failed"},
		{"StatusFailedDeepCursor", "limit=50&status=failed&cursor=" + httpserver.EncodeCursor(&deep)},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := srv.URL + "/api/runs?" + c.query
			get := func() time.Duration {
				start := time.Now()
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || len(body) < 100 {
					b.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
				}
				return time.Since(start)
			}
			get() // warm the connection and the prepared statement
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				lat = append(lat, get())
			}
			b.StopTimer()
			slices.Sort(lat)
			ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.95), "p95-ms")
		})
	}
}
