package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testURL is the PostgreSQL of the tests (pgtest.URL).
func testURL() string { return pgtest.URL() }

// requireDB skips t without PostgreSQL, or fails it under CI.
func requireDB(t testing.TB) {
	t.Helper()
	pgtest.Require(t)
}

// redacted is a URL with its password masked, for messages.
func redacted(s string) string { return pgtest.Redacted(s) }

// adminExec runs sql on a connection of its own.
func adminExec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newSchema returns a fresh schema name for t and drops the schema (if a
// store created it) when t ends, after every store of t is closed.
func newSchema(t testing.TB) string {
	t.Helper()
	requireDB(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sf_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { adminExec(t, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// open opens and migrates a store on schema with hooks; Close runs at the
// end of t.
func open(t testing.TB, schema string, hooks []state.TxHook) *pgstore.Store {
	t.Helper()
	return openConfig(t, pgstore.Config{Schema: schema, Hooks: hooks})
}

// openConfig opens and migrates a store with cfg (URL defaults to
// testURL); Close runs at the end of t.
func openConfig(t testing.TB, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = testURL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", cfg.Schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(schema %s): %v", cfg.Schema, err)
	}
	return s
}

// fresh opens a migrated store on a new schema.
func fresh(t testing.TB) *pgstore.Store {
	t.Helper()
	return open(t, newSchema(t), nil)
}

// openFresh is the statetest.Opener: a new schema per test.
func openFresh(t *testing.T, hooks []state.TxHook) state.Adapter {
	return open(t, newSchema(t), hooks)
}

// reopen is the statetest.Reopener: close a and open its schema again.
func reopen(t *testing.T, a state.Adapter, hooks []state.TxHook) state.Adapter {
	t.Helper()
	s, ok := a.(*pgstore.Store)
	if !ok {
		t.Fatalf("reopen: %T is not a *pgstore.Store", a)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close before reopening: %v", err)
	}
	return open(t, s.Schema(), hooks)
}

// share is the statetest Share: another Store on a's schema.
func share(t *testing.T, a state.Adapter) state.Adapter {
	t.Helper()
	s, ok := a.(*pgstore.Store)
	if !ok {
		t.Fatalf("share: %T is not a *pgstore.Store", a)
	}
	return open(t, s.Schema(), nil)
}

// backdate is the statetest Backdate.
func backdate(t *testing.T, a state.Adapter, by time.Duration) {
	t.Helper()
	for table, cols := range statetest.BackdateColumns {
		var set []string
		for _, c := range cols {
			set = append(set, fmt.Sprintf("%s = %s - $1::bigint * interval '1 microsecond'", c, c))
		}
		if _, err := a.(*pgstore.Store).Pool().Exec(t.Context(), "UPDATE "+table+" SET "+strings.Join(set, ", "), by.Microseconds()); err != nil {
			t.Fatalf("backdate %s: %v", table, err)
		}
	}
}

func TestConformance(t *testing.T) {
	statetest.RunOpener(t, openFresh, statetest.Options{Reopen: reopen, Share: share, SetCreatedAt: setCreatedAt, Backdate: backdate})
}

// setCreatedAt is the statetest SetCreatedAt.
func setCreatedAt(t *testing.T, a state.Adapter, at time.Time, ids ...string) {
	t.Helper()
	if _, err := a.(*pgstore.Store).Pool().Exec(t.Context(), `UPDATE workflow_runs SET created_at = $1 WHERE id = ANY ($2::uuid[])`, at, ids); err != nil {
		t.Fatalf("set created_at of %v: %v", ids, err)
	}
}

// TestConformanceStatements runs the suite with the step writes executed
// statement by statement (internal/storecore's generic path, the one
// SQLite takes) instead of the one-statement StepBatcher: both paths of
// the same store meet the same contract.
func TestConformanceStatements(t *testing.T) {
	statetest.RunOpener(t, func(t *testing.T, hooks []state.TxHook) state.Adapter {
		cfg := pgstore.Config{Schema: newSchema(t), Hooks: hooks}
		pgstore.StatementsOnly(&cfg)
		return openConfig(t, cfg)
	}, statetest.Options{SetCreatedAt: setCreatedAt, Backdate: backdate})
}

// TestSchemaIsolation: two stores on two schemas of one database share
// nothing, goose's version table lives in each schema, and a second store
// on the same schema sees the first one's runs.
func TestSchemaIsolation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := fresh(t), fresh(t)
	r, err := a.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetRun(ctx, &state.GetRunParams{ID: r.ID}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("GetRun of schema a's run from schema b: %v, want ErrNotFound", err)
	}
	if c, err := b.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Minute}); err != nil || c != nil {
		t.Errorf("ClaimRun in schema b = %+v, %v; want nothing", c, err)
	}
	for _, s := range []*pgstore.Store{a, b} {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1
			AND tablename IN ('goose_db_version', 'workflow_runs', 'idempotency_receipts')`, s.Schema()).Scan(&n)
		if err != nil || n != 3 {
			t.Errorf("schema %s holds %d of goose_db_version, workflow_runs, idempotency_receipts (%v), want 3", s.Schema(), n, err)
		}
	}
	again := open(t, a.Schema(), nil)
	if got, err := again.GetRun(ctx, &state.GetRunParams{ID: r.ID}); err != nil || got.ID != r.ID {
		t.Errorf("GetRun from a second store on schema a: %+v, %v", got, err)
	}
}

// TestConcurrentMigrate: several processes migrating one new schema at
// once (simulated by several stores) all succeed, and the migrations ran
// once.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	const n = 4
	stores := make([]*pgstore.Store, n)
	for i := range stores {
		s, err := pgstore.Open(ctx, pgstore.Config{URL: testURL(), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	var applied, distinct int
	err := stores[0].Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&applied, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied < 3 {
		t.Errorf("%d migrations recorded, %d distinct; want each of the migrations (at least 3) once", applied, distinct)
	}
}

// TestMalformedIDs: uuid columns cannot hold other text, so an id that is
// not a uuid names no row: reads find nothing, fenced writes lose their
// lease, and an enqueue with one is refused before it reaches the database.
func TestMalformedIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := fresh(t)
	const bad = "run-1"
	if _, err := s.GetRun(ctx, &state.GetRunParams{ID: bad}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("GetRun(%q): %v, want ErrNotFound", bad, err)
	}
	if _, err := s.GetDefinition(ctx, &state.GetDefinitionParams{ID: bad}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("GetDefinition(%q): %v, want ErrNotFound", bad, err)
	}
	l := starflowtype.Lease{RunnerID: "r", Epoch: 1}
	if _, err := s.OnRunStart(ctx, &state.RunStartParams{RunID: bad, Lease: l}); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Errorf("OnRunStart(%q): %v, want ErrLeaseLost", bad, err)
	}
	if _, err := s.RefreshLease(ctx, &state.RefreshLeaseParams{RunID: bad, Lease: l, LeaseTTL: time.Minute}); !errors.Is(err, starflowtype.ErrLeaseLost) {
		t.Errorf("RefreshLease(%q): %v, want ErrLeaseLost", bad, err)
	}
	for what, list := range map[string]func() (int, error){
		"ListEvents": func() (int, error) {
			evs, err := s.ListEvents(ctx, &state.ListEventsParams{RunID: bad})
			return len(evs), err
		},
		"ListSteps": func() (int, error) {
			st, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: bad})
			return len(st), err
		},
		"ListCheckpoints": func() (int, error) {
			cps, err := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: bad})
			return len(cps), err
		},
	} {
		if n, err := list(); n != 0 || err != nil {
			t.Errorf("%s(%q) = %d, %v; want nothing", what, bad, n, err)
		}
	}
	for _, p := range []*state.EnqueueRunParams{
		{ID: bad, WorkflowName: "wf"},
		{ParentRunID: bad, WorkflowName: "wf"},
		{DefinitionID: bad, WorkflowName: "wf"},
	} {
		if r, err := s.EnqueueRun(ctx, p); err == nil {
			t.Errorf("EnqueueRun(%+v) = %+v, want an error", p, r)
		}
	}
	// Upper case and braces are uuids too, read back in canonical form.
	r, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{ID: "{0A6C6F0E-3F51-4A0B-9A0E-2B0F6C1D2E3F}", WorkflowName: "wf", IdempotencyKey: "k"})
	if err != nil || r.ID != "0a6c6f0e-3f51-4a0b-9a0e-2b0f6c1d2e3f" {
		t.Fatalf("EnqueueRun with an upper-case id = %+v, %v", r, err)
	}
	if got, err := s.GetRun(ctx, &state.GetRunParams{ID: "0A6C6F0E-3F51-4A0B-9A0E-2B0F6C1D2E3F"}); err != nil || got.ID != r.ID {
		t.Errorf("GetRun with the upper-case id = %+v, %v", got, err)
	}
}

// TestReapplyMakesCurrent: storing an older revision again makes it the
// one GetDefinition returns by name, keeping its id.
func TestReapplyMakesCurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := fresh(t)
	put := func(rev string) *starflowtype.Definition {
		t.Helper()
		d, err := s.PutDefinition(ctx, &state.PutDefinitionParams{Name: "orders", Revision: rev, Spec: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	current := func() string {
		t.Helper()
		d, err := s.GetDefinition(ctx, &state.GetDefinitionParams{Name: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	d1, d2 := put("rev1"), put("rev2")
	if got := current(); got != d2.ID {
		t.Fatalf("current = %s, want rev2 %s", got, d2.ID)
	}
	if again := put("rev1"); again.ID != d1.ID {
		t.Fatalf("re-applying rev1 gave id %s, want %s", again.ID, d1.ID)
	}
	if got := current(); got != d1.ID {
		t.Fatalf("current after re-applying rev1 = %s, want %s", got, d1.ID)
	}
}
