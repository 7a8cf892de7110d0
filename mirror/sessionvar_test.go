package mirror_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

// pgxTx adapts a pgx.Tx to state.Tx (what pgstore hands its hooks).
type pgxTx struct{ tx pgx.Tx }

func (p pgxTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (p pgxTx) Query(ctx context.Context, q string, args ...any) (state.Rows, error) {
	return p.tx.Query(ctx, q, args...)
}

func (p pgxTx) QueryRow(ctx context.Context, q string, args ...any) state.Row {
	return p.tx.QueryRow(ctx, q, args...)
}

// TestSessionVarRows: a write's session variables (Change.SessionVars, as
// SessionSet and a run's end report them) become session_var rows in its
// transaction and reach the warm store: a set value is stored, a removed
// one (nil Value) deleted. The hook is called on a transaction of the
// dialect directly, since the stores' SessionSet lands with another issue.
func TestSessionVarRows(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, c cold, run func(ch *state.Change)) {
		r, err := c.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		ws := memory.New()
		if err := ws.PutSessionVar(ctx, "default", "sess", "gone", []byte(`1`)); err != nil {
			t.Fatal(err)
		}
		run(&state.Change{Op: "SessionSet", RunID: r.ID, Run: r, SessionVars: []*starflowtype.SessionVar{
			{WorkspaceID: "default", SessionID: "sess", Key: "kept", Value: []byte(`{"n":42}`), OriginRunID: r.ID},
			{WorkspaceID: "default", SessionID: "sess", Key: "gone", OriginRunID: r.ID},
		}})
		d := mirror.NewDrainer(c, mirror.Config{Warm: ws}, nil)
		if _, err := d.DrainOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := ws.GetSessionVar(ctx, "default", "sess", "kept"); err != nil || string(v) != `{"n":42}` {
			t.Fatalf("warm kept = %s, %v; want {\"n\":42}", v, err)
		}
		if _, err := ws.GetSessionVar(ctx, "default", "sess", "gone"); !errors.Is(err, warm.ErrNotFound) {
			t.Fatalf("warm gone: %v, want ErrNotFound", err)
		}
		if e, err := ws.GetRun(ctx, r.ID); err != nil || e.Version != 2 {
			t.Fatalf("warm run = %+v, %v; want version 2 (the session write bumps it)", e, err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.db")
		c := openSQLite(t, path, []state.TxHook{mirror.Hook()})
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check(t, c, func(ch *state.Change) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := mirror.Hook()(ctx, state.SQLTx(tx), "sqlite", ch); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		schema := newSchema(t)
		c := openPG(t, schema, []state.TxHook{mirror.Hook()})
		cfg, err := pgx.ParseConfig(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["search_path"] = schema
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		check(t, c, func(ch *state.Change) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := mirror.Hook()(ctx, pgxTx{tx}, "postgres", ch); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}
