package pgstore

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
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
