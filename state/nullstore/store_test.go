package nullstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/state/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance: every case of the suite but close-and-reopen, hooks
// included.
func TestConformance(t *testing.T) {
	statetest.RunOpener(t, func(t *testing.T, hooks []state.TxHook) state.Adapter {
		return openCopy(t, hooks)
	}, statetest.Options{SetCreatedAt: func(t *testing.T, a state.Adapter, at time.Time, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := a.(*nullstore.Store).DB().ExecContext(t.Context(), `UPDATE workflow_runs SET created_at = ?1 WHERE id = ?2`,
				at.UTC().Format("2006-01-02T15:04:05.000Z"), id); err != nil {
				t.Fatalf("set created_at of %s: %v", id, err)
			}
		}
	}})
}

// migrated is the serialization of an in-memory database migrated once
// per test binary, through nullstore.Open.
var migrated = sync.OnceValues(func() ([]byte, error) {
	s, err := nullstore.Open(nullstore.Config{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var b []byte
	err = rawConn(s.DB(), func(c serializer) error {
		b, err = c.Serialize()
		return err
	})
	return b, err
})

// serializer is the part of modernc.org/sqlite's connection that copies
// a database to and from bytes (sqlite3_serialize, sqlite3_deserialize).
type serializer interface {
	Serialize() ([]byte, error)
	Deserialize([]byte) error
}

// rawConn calls f with db's driver connection; db has one connection (an
// in-memory database), so it is the database's only connection.
func rawConn(db *sql.DB, f func(serializer) error) error {
	c, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		s, ok := dc.(serializer)
		if !ok {
			return fmt.Errorf("driver connection %T cannot serialize", dc)
		}
		return f(s)
	})
}

// openCopy is nullstore.Open with the migrations copied instead of run:
// the store's in-memory database is replaced by a copy of migrated, then
// Migrate runs as in Open and finds nothing to do. Migrating took most of
// each conformance case's time under -race (CI time, decision 235);
// TestPrivate and TestOpenMigrates open through Open itself.
func openCopy(t *testing.T, hooks []state.TxHook) state.Adapter {
	t.Helper()
	img, err := migrated()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(sqlitestore.Config{Path: sqlitestore.Memory, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := rawConn(s.DB(), func(c serializer) error { return c.Deserialize(img) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &nullstore.Store{Store: s}
}

// TestOpenMigrates: Open's database has the schema of the copies the
// conformance suite runs on.
func TestOpenMigrates(t *testing.T) {
	s, err := nullstore.Open(nullstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := openCopy(t, nil).(*nullstore.Store)
	schema := func(db *sql.DB) string {
		var out string
		if err := db.QueryRowContext(t.Context(), `SELECT group_concat(type || ' ' || name || ': ' || coalesce(sql, ''), char(10)) FROM (SELECT * FROM sqlite_schema ORDER BY type, name)`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := schema(s.DB()), schema(c.DB())
	if want == "" || !strings.Contains(want, "workflow_runs") {
		t.Fatalf("the copy has no workflow_runs table:\n%s", want)
	}
	if got != want {
		t.Fatalf("Open's schema differs from the copy's:\n%s\nwant:\n%s", got, want)
	}
}

// TestPrivate: two Stores share nothing, and a Store is not durable.
func TestPrivate(t *testing.T) {
	a, b := nullstore.New(), nullstore.New()
	defer a.Close()
	defer b.Close()
	if a.Capabilities().Durable {
		t.Error("nullstore says it is durable")
	}
	r, err := a.EnqueueRun(t.Context(), &state.EnqueueRunParams{WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := b.ClaimRun(t.Context(), &state.ClaimRunParams{RunnerID: "x", LeaseTTL: time.Minute}); err != nil || c != nil {
		t.Fatalf("the other store claimed %+v, %v; want nothing", c, err)
	}
	if c, err := a.ClaimRun(t.Context(), &state.ClaimRunParams{RunnerID: "x", LeaseTTL: time.Minute}); err != nil || c == nil || c.ID != r.ID {
		t.Fatalf("ClaimRun = %+v, %v; want run %s", c, err, r.ID)
	}
}
