package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"

	"github.com/starflow/starflow/internal/waketoken"
)

// FileMode is the mode of every file of a Starflow SQLite database: the
// database itself, its -wal, -shm and -journal files. Only the owner may
// read or write them (issue 10: the database holds run inputs, outputs and
// wait state that other local users must not read).
const FileMode fs.FileMode = 0o600

// WakeKeyFileSuffix names the wake-key file that belongs with a database:
// PATH + WakeKeyFileSuffix (e.g. starflow.db.wakekeys), reported as
// Capabilities().WakeKeyFile. The key file holds the wake-token signing
// secrets, which the database never does (see internal/waketoken).
const WakeKeyFileSuffix = ".wakekeys"

// databaseFiles are the files SQLite keeps for the database at path.
func databaseFiles(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}

// secureFiles makes the database at path owner-only before SQLite opens
// it. A database that does not exist yet is created empty with FileMode
// (SQLite gives its -wal and -shm files the database file's mode, so they
// are owner-only too). Existing files that group or others may access are
// tightened (their group and other bits cleared) with a warning on log
// naming each; a file that cannot be tightened (owned by another user) is
// reported with a warning and left as it is: the database holds no
// signing secret, so it still opens. Errors: the database file cannot be
// created (its folder is missing or not writable).
func secureFiles(path string, log *slog.Logger) error {
	if runtime.GOOS == "windows" {
		return nil // no group/other permission bits to tighten
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return fmt.Errorf("sqlitestore: create %s: %w", path, err)
		}
	case errors.Is(err, fs.ErrExist):
	default:
		return fmt.Errorf("sqlitestore: create %s: %w", path, err)
	}
	for _, name := range databaseFiles(path) {
		tighten(name, log)
	}
	return nil
}

// tighten clears the group and other permission bits of file name when any
// is set, logging a warning; a missing file is nothing to do.
func tighten(name string, log *slog.Logger) {
	fi, err := os.Stat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return
	}
	want := mode &^ 0o077
	if err := os.Chmod(name, want); err != nil {
		log.Warn("database file is readable or writable by other users and could not be made owner-only; fix its mode (chmod 600) or its owner",
			"file", name, "mode", fmt.Sprintf("%04o", mode), "error", err)
		return
	}
	log.Warn("database file was readable or writable by other users; made it owner-only",
		"file", name, "from", fmt.Sprintf("%04o", mode), "to", fmt.Sprintf("%04o", want))
}

// moveWakeKeySecrets adds the wake-token secrets a database older than
// migration 00008 keeps in wake_keys to the key file beside it, so that
// the tokens they signed keep verifying once the migration has dropped
// them. moved reports whether there were any (the caller then migrates
// with secure_delete on). A database without the secret column (new, or
// migrated already) has nothing to move.
func (s *Store) moveWakeKeySecrets(ctx context.Context) (moved bool, err error) {
	var n int
	if err := s.write.QueryRowContext(ctx,
		`SELECT count(*) FROM pragma_table_info('wake_keys') WHERE name = 'secret'`).Scan(&n); err != nil {
		return false, fmt.Errorf("sqlitestore: migrate: look for stored wake-key secrets: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	rows, err := s.write.QueryContext(ctx, `SELECT id, secret FROM wake_keys ORDER BY created_at DESC, rowid DESC`)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: migrate: read stored wake-key secrets: %w", err)
	}
	var keys []waketoken.Key
	for rows.Next() {
		var k waketoken.Key
		if err := rows.Scan(&k.ID, &k.Secret); err != nil {
			rows.Close()
			return false, fmt.Errorf("sqlitestore: migrate: read stored wake-key secrets: %w", err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqlitestore: migrate: read stored wake-key secrets: %w", err)
	}
	if len(keys) == 0 {
		return false, nil
	}
	file := s.cfg.Path + WakeKeyFileSuffix
	added, err := waketoken.AddToKeyFile(file, keys, s.cfg.Logger)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: migrate: move the wake-token secrets out of the database into %s: %w", file, err)
	}
	if len(added) > 0 {
		s.cfg.Logger.Warn("moved the wake-token signing secrets out of the database into the key file (mode 0600); the database keeps only key ids and fingerprints",
			"database", s.cfg.Path, "key_file", file, "key_ids", added)
	}
	return true, nil
}
