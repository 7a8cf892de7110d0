package pgstore

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/starflow/starflow/internal/storecore"
)

// Query is the statement named name of queries.sql, for the plan tests.
func Query(name string) string { return query(name) }

// MigrateUpTo creates the store's schema and applies the migrations up to
// version v only (an older database, for the upgrade tests).
func MigrateUpTo(ctx context.Context, s *Store, v int64) error {
	if err := s.createSchema(ctx); err != nil {
		return err
	}
	fsys, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, v)
	return err
}

// StatementsOnly makes Open build a store whose step writes run statement
// by statement (the generic path of internal/storecore), not through the
// dialect's one-statement StepBatcher.
func StatementsOnly(c *Config) { c.statementsOnly = true }

// StepWritesInTx runs each batch of ws through the store's StepBatcher,
// all in one transaction, and commits it: the statements of group
// commits, without the committer's timing. probe (when not nil) runs in
// that transaction before the first batch and after the last.
func StepWritesInTx(ctx context.Context, s *Store, probe func(storecore.Conn) error, ws ...[]*storecore.StepWrite) error {
	d := &dialect{pool: s.pool}
	c, err := d.Begin(ctx, storecore.TxOptions{ByKey: true}) // as the committer's
	if err != nil {
		return err
	}
	t := c.(*tx)
	defer func() { _ = t.Rollback(ctx) }()
	if probe != nil {
		if err := probe(t); err != nil {
			return err
		}
	}
	for _, batch := range ws {
		if err := d.StepWrites(ctx, t, batch); err != nil {
			return err
		}
	}
	if probe != nil {
		if err := probe(t); err != nil {
			return err
		}
	}
	return t.Commit(ctx)
}

// Begin opens a write transaction of s's dialect, as the core does.
func Begin(ctx context.Context, s *Store, opts storecore.TxOptions) (storecore.Conn, error) {
	return (&dialect{pool: s.pool, channel: s.channel}).Begin(ctx, opts)
}
