package mirror_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// cold is a SQL adapter with its outbox.
type cold interface {
	state.Adapter
	state.Outbox
}

// backend opens fresh cold stores of one dialect; open(t, hooks) opens
// another store on the same database (a second process's view).
type backend struct {
	name    string
	newOpen func(t *testing.T) func(hooks ...state.TxHook) cold
}

var backends = []backend{
	{"sqlite", func(t *testing.T) func(hooks ...state.TxHook) cold {
		path := filepath.Join(t.TempDir(), "starflow.db")
		return func(hooks ...state.TxHook) cold { return openSQLite(t, path, hooks) }
	}},
	{"postgres", func(t *testing.T) func(hooks ...state.TxHook) cold {
		schema := newSchema(t)
		return func(hooks ...state.TxHook) cold { return openPG(t, schema, hooks) }
	}},
}

func forEachBackend(t *testing.T, f func(t *testing.T, open func(hooks ...state.TxHook) cold)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.newOpen(t)) })
	}
}

func openSQLite(t *testing.T, path string, hooks []state.TxHook) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Hooks: hooks, Synchronous: sqlitestore.SynchronousNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func newSchema(t testing.TB) string {
	t.Helper()
	pgtest.Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_mirror_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgtest.URL())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func openPG(t testing.TB, schema string, hooks []state.TxHook) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: schema, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// newMirror wraps c with cfg (Warm defaults to a new memory store; no
// periodic sweep unless cfg sets one) and runs it until the test ends.
func newMirror(t *testing.T, c state.Adapter, cfg mirror.Config) *mirror.Adapter {
	t.Helper()
	if cfg.Warm == nil {
		cfg.Warm = memory.New()
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	m, err := mirror.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// execRun runs one run of n steps through a: enqueue, claim, start, n
// steps, complete. Returns the run as completed.
func execRun(t testing.TB, a state.Adapter, n int) *starflowtype.Run {
	t.Helper()
	r, err := execRunE(a, n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// execRunE is execRun reporting errors (for other goroutines).
func execRunE(a state.Adapter, n int) (*starflowtype.Run, error) {
	ctx := context.Background()
	r, err := a.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		return nil, fmt.Errorf("EnqueueRun: %w", err)
	}
	r, err = startRunE(a, r.ID)
	if err != nil {
		return nil, err
	}
	for i := range n {
		if err := stepE(a, r, fmt.Sprintf("s%d", i)); err != nil {
			return nil, err
		}
	}
	done, err := a.OnRunComplete(ctx, &state.RunCompleteParams{RunID: r.ID, Lease: r.Lease()})
	if err != nil {
		return nil, fmt.Errorf("OnRunComplete: %w", err)
	}
	return done, nil
}

// startRun claims and starts run id.
func startRun(t testing.TB, a state.Adapter, id string) *starflowtype.Run {
	t.Helper()
	r, err := startRunE(a, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func startRunE(a state.Adapter, id string) (*starflowtype.Run, error) {
	ctx := context.Background()
	r, err := a.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "runner", LeaseTTL: time.Minute, RunID: id})
	if err != nil || r == nil {
		return nil, fmt.Errorf("ClaimRun(%s) = %v, %v", id, r, err)
	}
	if r, err = a.OnRunStart(ctx, &state.RunStartParams{RunID: id, Lease: r.Lease()}); err != nil {
		return nil, fmt.Errorf("OnRunStart: %w", err)
	}
	return r, nil
}

// step runs one step of r to completion.
func step(t testing.TB, a state.Adapter, r *starflowtype.Run, id string) {
	t.Helper()
	if err := stepE(a, r, id); err != nil {
		t.Fatal(err)
	}
}

func stepE(a state.Adapter, r *starflowtype.Run, id string) error {
	ctx := context.Background()
	k := state.StepKey{RunID: r.ID, Attempt: r.Attempt, StepID: id}
	if err := a.OnNodeStart(ctx, &state.NodeStartParams{StepKey: k, Lease: r.Lease(), Kind: "noop", Try: 1}); err != nil {
		return fmt.Errorf("OnNodeStart: %w", err)
	}
	if err := a.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: k, Lease: r.Lease(), Try: 1, Output: []byte(`{}`)}); err != nil {
		return fmt.Errorf("OnNodeComplete: %w", err)
	}
	return nil
}

// eventually polls cond every 10 ms until it holds or 20 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20 s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pending is the outbox depth.
func pending(t testing.TB, ob state.Outbox) int64 {
	t.Helper()
	st, err := ob.OutboxStats(context.Background(), &state.OutboxStatsParams{})
	if err != nil {
		t.Fatalf("OutboxStats: %v", err)
	}
	return st.Pending
}

// coldEntry is the warm entry the cold tier says run id should have.
func coldEntry(t testing.TB, c cold, id string) *warm.RunEntry {
	t.Helper()
	ctx := context.Background()
	r, err := c.GetRun(ctx, &state.GetRunParams{ID: id})
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	steps, err := c.ListSteps(ctx, &state.ListStepsParams{RunID: id, Attempt: r.Attempt})
	if err != nil {
		t.Fatalf("ListSteps: %v", err)
	}
	mrs, err := c.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{id}})
	if err != nil || len(mrs) != 1 {
		t.Fatalf("MirrorRuns(%s) = %v, %v", id, mrs, err)
	}
	return mirror.RunEntry(r, mirror.CurrentSteps(steps, r.Attempt), mrs[0].Version)
}

// matches reports whether ws holds the entry cold says run id should have.
func matches(t testing.TB, c cold, ws warm.Store, id string) bool {
	t.Helper()
	got, err := ws.GetRun(context.Background(), id)
	if err != nil {
		return false
	}
	return mirror.Hash(got) == coldEntry(t, c, id).Hash
}

var errDown = errors.New("warm store down (test)")

// flaky is a warm store that fails every call while down is set.
type flaky struct {
	warm.Store
	down atomic.Bool
}

func (f *flaky) err() error {
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *flaky) PutRun(ctx context.Context, e *warm.RunEntry, force bool) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.Store.PutRun(ctx, e, force)
}

func (f *flaky) GetRun(ctx context.Context, id string) (*warm.RunEntry, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.GetRun(ctx, id)
}

func (f *flaky) PutStep(ctx context.Context, s *warm.StepEntry) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.PutStep(ctx, s)
}

func (f *flaky) AppendEvents(ctx context.Context, runID string, evs []*warm.EventEntry, keep int) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.AppendEvents(ctx, runID, evs, keep)
}

func (f *flaky) PutSessionVar(ctx context.Context, ws, sess, key string, v json.RawMessage) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.PutSessionVar(ctx, ws, sess, key, v)
}

func (f *flaky) Ping(ctx context.Context) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Ping(ctx)
}

// recorder is a warm store that records every PutRun and PutStep call.
type recorder struct {
	warm.Store
	mu    sync.Mutex
	runs  map[string][]int64 // run id → versions of PutRun calls, in call order
	steps int
}

func (r *recorder) PutRun(ctx context.Context, e *warm.RunEntry, force bool) (bool, error) {
	r.mu.Lock()
	if r.runs == nil {
		r.runs = map[string][]int64{}
	}
	r.runs[e.RunID] = append(r.runs[e.RunID], e.Version)
	r.mu.Unlock()
	return r.Store.PutRun(ctx, e, force)
}

func (r *recorder) PutStep(ctx context.Context, s *warm.StepEntry) error {
	r.mu.Lock()
	r.steps++
	r.mu.Unlock()
	return r.Store.PutStep(ctx, s)
}

func testutilValue(m *mirror.Metrics) float64 { return testutil.ToFloat64(m.Applied) }

// reconciliations is how many end-of-run reconciliations ended, whatever
// their result (ok, corrected, or skipped: rows not drained within
// ReconcileWait, which a loaded machine can cause).
func reconciliations(m *mirror.Adapter) float64 {
	var n float64
	for _, r := range []string{"ok", "corrected", "skipped"} {
		n += testutil.ToFloat64(m.Metrics().Reconciles.WithLabelValues(r))
	}
	return n
}
