// Package sqlitestore is the embedded SQLite cold-tier adapter (SPEC §4) on
// the pure-Go driver modernc.org/sqlite, so the starflow binary builds
// without cgo.
//
// It is the store core (internal/storecore) over the SQLite dialect: this
// package holds connection handling, queries.sql (the named queries, with
// the same names and arguments as PostgreSQL's), migrations, file modes
// and leader election. Path Memory (":memory:") is an in-memory database
// with one connection for writes and reads (state/nullstore).
//
// Settings: WAL journal; one writer connection (every write runs in the
// core's group committer: a BEGIN IMMEDIATE transaction per batch, each
// write in a savepoint, so writes are serialised in-process and across
// processes and a batch costs one fsync); a pool of reader connections,
// every query prepared once; busy_timeout 10 s;
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
// Import rule: imports state, starflowtype and internal/{storecore,sqlq,
// waketoken}; never the engine.
package sqlitestore
