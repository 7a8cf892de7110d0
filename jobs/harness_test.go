package jobs_test

// The harness of the jobs package's tests: a real engine (runner and
// maintenance: the job sweep) on a fresh SQLite file or PostgreSQL schema,
// the real HTTP API around it (internal/httpserver) on an httptest
// server, and a client of it.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/jobs"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/warm/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is one test's deployment: an engine with a runner and maintenance
// on its own store, the HTTP API serving it, and a client of the API.
type env struct {
	t    *testing.T
	kind string // sqlite or postgres
	eng  *starflow.Engine
	srv  *httptest.Server
	c    *client.Client
	// query runs one statement returning one row (the store's own pool);
	// placeholders are written $1, $2 for both stores.
	query func(ctx context.Context, q string, args ...any) rowScanner
	// refuse makes the API answer every job call 503 while set: a
	// server that cannot be reached, for the worker's heartbeats.
	refuse atomic.Bool
}

// wakeKeys is the engines' wake-token key ring (a PostgreSQL store keeps
// none).
const wakeKeys = "jobstest:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

type rowScanner interface{ Scan(dest ...any) error }

// dollar is a PostgreSQL placeholder ($1), written ?1 for SQLite.
var dollar = regexp.MustCompile(`\$(\d+)`)

// eachStore runs f on SQLite and on PostgreSQL (skipped without it, unless
// CI is set).
func eachStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, newEnv(t, "sqlite"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pgtest.Require(t)
		f(t, newEnv(t, "postgres"))
	})
}

func newEnv(t *testing.T, kind string) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, kind: kind}
	hooks := []state.TxHook{mirror.Hook()}
	var store state.Adapter
	switch kind {
	case "sqlite":
		s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "jobs.db"), Hooks: hooks, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		db := s.DB()
		e.query = func(ctx context.Context, q string, args ...any) rowScanner {
			return db.QueryRowContext(ctx, dollar.ReplaceAllString(q, "?$1"), args...)
		}
		store = s
	case "postgres":
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "jobstest_" + hex.EncodeToString(b[:])
		s, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: schema, Hooks: hooks, MaxConns: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.Close()
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(cctx, pgtest.URL())
			if err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			defer conn.Close(cctx)
			if _, err := conn.Exec(cctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		pool := s.Pool()
		e.query = func(ctx context.Context, q string, args ...any) rowScanner { return pool.QueryRow(ctx, q, args...) }
		store = s
	default:
		t.Fatalf("unknown store %q", kind)
	}
	live := memory.New()
	t.Cleanup(func() { live.Close() })
	eng, err := starflow.New(starflow.Config{Store: store, Warm: live, Maintenance: true, PollInterval: 20 * time.Millisecond,
		WakeKeys: wakeKeys, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(sctx)
	})
	e.eng = eng
	h, err := httpserver.New(httpserver.Config{Backend: eng, Logger: quietLogger(),
		API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.refuse.Load() {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"title": "Service Unavailable", "status": 503, "detail": "refused by the test"}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	e.c = client.New(e.srv.URL, "")
	return e
}

// apply stores a definition.
func (e *env) apply(src string) {
	e.t.Helper()
	if _, err := e.eng.Apply(context.Background(), "test.yaml", []byte(src)); err != nil {
		e.t.Fatalf("apply: %v", err)
	}
}

// enqueue starts a run of workflow with input.
func (e *env) enqueue(workflow string, input any) string {
	e.t.Helper()
	run, err := e.eng.Enqueue(context.Background(), workflow, input, nil)
	if err != nil {
		e.t.Fatalf("enqueue %s: %v", workflow, err)
	}
	return run.ID
}

// wait waits (at most a minute) for the run to settle.
func (e *env) wait(id string) *starflowtype.Run {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.eng.WaitRun(ctx, id)
	if err != nil {
		e.t.Fatalf("waiting for run %s: %v", id, err)
	}
	return run
}

// output is the run's output, decoded.
func output(t *testing.T, run *starflowtype.Run) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatalf("run %s output %s: %v", run.ID, run.Output, err)
	}
	return out
}

// count runs a query returning one integer.
func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := e.query(ctx, q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// str runs a query returning one text value ("" for NULL).
func (e *env) str(q string, args ...any) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s sql.NullString
	if err := e.query(ctx, q, args...).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s.String
}

// poll claims a job of types through the client, waiting up to 10 s.
func (e *env) poll(worker string, types ...string) *api.Job {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		j, err := e.c.PollJob(ctx, types, worker, 10*time.Second)
		if err != nil {
			e.t.Fatalf("poll %v: %v", types, err)
		}
		if j != nil {
			return j
		}
		if ctx.Err() != nil {
			e.t.Fatalf("no job of %v within 20 s", types)
		}
	}
}

// worker starts a worker (its handlers registered by register) running
// until the test ends or stop is called; stop returns Run's error.
func (e *env) worker(opts jobs.Options, register func(w *jobs.Worker) error) (stop func() error) {
	e.t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.PollWait == 0 {
		opts.PollWait = time.Second
	}
	w, err := jobs.NewWorker(e.c, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := register(w); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(time.Minute):
				runErr = errors.New("Run did not return within a minute of its context's end")
			}
		})
		return runErr
	}
	e.t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond every 20 ms until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
