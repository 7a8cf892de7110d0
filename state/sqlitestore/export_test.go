package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/pressly/goose/v3"
)

// MigrateUpTo applies the migrations up to version v only (an older
// database, for the upgrade tests).
func MigrateUpTo(ctx context.Context, s *Store, v int64) error {
	fsys, err := subFS()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.write, fsys)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, v)
	return err
}

// WriteDB is the store's writer connection, for tests that write rows an
// older version would have written.
func WriteDB(s *Store) *sql.DB { return s.write }
