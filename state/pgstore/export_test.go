package pgstore

import (
	"context"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// The drain and stats statements of outbox.go, for the plan tests.
const OutboxCandidatesSQL = outboxCandidatesSQL

func OutboxStatsQuery(bounds []time.Duration) (string, []any) { return outboxStatsQuery(bounds) }

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
