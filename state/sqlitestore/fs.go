package sqlitestore

import "io/fs"

func subFS() (fs.FS, error) { return fs.Sub(migrationsFS, "migrations") }
