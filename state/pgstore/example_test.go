package pgstore_test

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// A Go program enqueues a run in the same transaction as its own write:
// both commit, or neither does. (Not run by go test: it needs a server.)
func ExampleStore_EnqueueTx() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://localhost/app", Schema: "starflow"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO public.orders (id) VALUES ($1)`, "o-1"); err != nil {
			return err
		}
		_, err := s.EnqueueTx(ctx, tx, &state.EnqueueRunParams{WorkflowName: "order-fulfilment", IdempotencyKey: "o-1"})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A runner sleeps between claims until new work is announced.
func ExampleStore_Listen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://localhost/app", Schema: "starflow"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	wake := make(chan struct{}, 1)
	go func() {
		_ = s.Listen(ctx, func() {
			select {
			case wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		})
	}()
	for range wake {
		run, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "runner-1", LeaseTTL: 30 * time.Second})
		if err != nil || run == nil {
			continue
		}
		log.Printf("claimed %s", run.ID)
	}
}
