// Package pgstore is the PostgreSQL cold-tier adapter (SPEC §4) on pgx v5
// (pgxpool, natively: no database/sql on the hot path), for runners on many
// nodes sharing one database. It is the store core (internal/storecore)
// over the PostgreSQL dialect: this package holds connection handling,
// queries.sql (the named queries, with the same names and arguments as
// SQLite's), the one-statement step writes the core batches into one
// pipeline (stepbatch.go, the sw_* queries), migrations, LISTEN/NOTIFY,
// leader election and EnqueueTx.
//
// It keeps the same tables, columns and meanings as state/sqlitestore, in
// PostgreSQL types (uuid ids, timestamptz, json, boolean, bigserial event
// ids); the numbered migrations in migrations/ are embedded and run by goose
// (over a database/sql handle that borrows the pool's connections, for
// migrations only), under an advisory lock so that concurrent processes
// migrate once.
//
// JSON columns are json, not jsonb (migration 00004): the text is kept as
// written, as SQLite keeps it, so a value read back from a checkpoint has
// the type it was written with (jsonb would turn 1000000.0 into the int
// 1000000) and strings may hold \u0000. PostgreSQL still refuses text
// that is not JSON.
//
// Ids are uuid columns: an id that is not a uuid names no row (reads find
// nothing, fenced writes return ErrLeaseLost) and EnqueueRun refuses one;
// ids are read back in canonical lower-case form.
//
// Round trips. A write transaction sends BEGIN (and its settings) in one
// pipeline with its first statement, and its notifications with COMMIT
// (decision 239); a group commit's step writes go in one pipeline, the
// batch's pure steps in one statement (decisions 120, 121, 238).
//
// Concurrency. A claim is one UPDATE whose subquery locks the best queued
// runs with FOR UPDATE SKIP LOCKED, so claimers never wait on one another
// and never share a run; a claim that starts its runs makes them claimed
// and running in that one UPDATE (decision 240). Every runner write starts with the conditional
// fence on workflow_runs(id, leased_by, lease_epoch), which also takes the
// run's row lock for the rest of the transaction (a step write's statement
// locks the row FOR UPDATE under those conditions and writes it only when
// its step row changed). The lease sweep
// selects expired runs FOR UPDATE SKIP LOCKED under SET LOCAL lock_timeout,
// so neither a runner mid-write nor a frozen runner holding a row lock can
// block it, and several sweepers change disjoint runs. Runner connections
// set idle_in_transaction_session_timeout (default 20 s, below the 30 s
// lease TTL), so a frozen runner's locks are released by the server. Every
// time comes from the database clock.
//
// Isolation. With Config.Schema set, the adapter creates that schema when
// it migrates and sets search_path on every connection; goose's version
// table lives there too, and the LISTEN/NOTIFY channel is named after the
// schema, so several deployments (or parallel tests) share one database
// without seeing each other.
//
// Queue wake-ups (SPEC §7). EnqueueRun and every write that re-queues a run
// (OnRunError's retry, ClearLease, the sweep's retry) notify in their
// transaction (pg_notify, sent with COMMIT); Store.Listen holds one connection that LISTENs and
// calls back on each notification, so idle runners wake at once instead of
// after a poll. Store.EnqueueTx enqueues inside a caller's own pgx.Tx, so a
// Go program can enqueue atomically with its own writes.
//
// Import rule: imports state, starflowtype, internal/{storecore,sqlq},
// pgx and goose; never the engine, the runner or another adapter.
package pgstore
