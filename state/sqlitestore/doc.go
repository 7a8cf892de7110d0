// Package sqlitestore is the embedded SQLite cold-tier adapter (SPEC §4) on
// the pure-Go driver modernc.org/sqlite, so the starflow binary builds
// without cgo.
//
// Settings: WAL journal; one writer connection (every write is a BEGIN
// IMMEDIATE transaction on it, so writes are serialised in-process and
// across processes); a pool of reader connections; busy_timeout 10 s;
// synchronous=FULL by default (a committed step survives power loss, not
// only a process crash). Migrations are the numbered files in migrations/,
// embedded and run by goose.
//
// Files: the database and its -wal/-shm files are owner-only (FileMode,
// 0600; existing files others can read are tightened at Open with a
// warning). Wake-token secrets never go into the database: the key file
// beside it (PATH.wakekeys) holds them, and Migrate moves the secrets of a
// database older than migration 00008 there.
//
// Import rule: imports state, starflowtype and internal/{sqlq,faultpoint,
// waketoken}; never the engine.
package sqlitestore
