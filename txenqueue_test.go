package starflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state"
)

// TestTransactionalEnqueue: a run enqueued inside the application's own
// pgx transaction exists if and only if the application's data committed.
func TestTransactionalEnqueue(t *testing.T) {
	ctx := context.Background()
	store := openPG(t)
	eng, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(ctx, "o.yaml", []byte("name: order\nsteps:\n  - id: a\n    context_set: {x: 1}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pool().Exec(ctx, `CREATE TABLE app_orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	place := func(id string, fail bool) error {
		return pgx.BeginFunc(ctx, store.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO app_orders (id) VALUES ($1)`, id); err != nil {
				return err
			}
			p, err := eng.EnqueueParams(ctx, "order", map[string]any{"order": id}, &starflow.EnqueueOptions{IdempotencyKey: id})
			if err != nil {
				return err
			}
			if _, err := store.EnqueueTx(ctx, tx, p); err != nil {
				return err
			}
			if fail {
				return errors.New("the application changed its mind")
			}
			return nil
		})
	}
	if err := place("o-1", false); err != nil {
		t.Fatal(err)
	}
	if err := place("o-2", true); err == nil {
		t.Fatal("rollback expected")
	}
	runs, err := store.ListRuns(ctx, &state.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].IdempotencyKey != "o-1" {
		t.Fatalf("runs after one commit and one rollback: %+v", runs)
	}
}
