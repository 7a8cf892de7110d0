// Package storecore is the cold tier's store logic, written once over a
// narrow per-dialect layer (issue 11; River's driver layer is the model):
// fencing, the step writes, the run lifecycle, the lease sweep's retry and
// dead-letter rules, waits and wakes, session variables, wake keys, the
// outbox and the hooks' typed operations. state/sqlitestore and
// state/pgstore supply a Dialect each — connections, the text of every
// named query, value conversions, and for PostgreSQL a StepBatcher that
// sends many step writes in one round trip — and their migrations;
// state/nullstore is the SQLite dialect on an in-memory database.
//
// Writes ready at the same moment are group-committed (commit.go): on
// SQLite every write, each in a savepoint of one transaction; on
// PostgreSQL the step writes, in one pipeline. Every write stays one
// atomic, fenced unit: a stale lease writes nothing for its run and does
// not fail the others of its batch.
//
// Import rule: imports state, starflowtype, internal/faultpoint and
// google/uuid; never a SQL driver, a store, the engine or the runner.
package storecore
