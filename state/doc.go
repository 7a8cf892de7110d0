// Package state is the cold-tier contract (SPEC §4): the Adapter interface
// through which the engine, runners and maintenance write and read the
// system of record, its parameter types, and the transaction hook through
// which a wrapper (the mirror adapter's outbox) adds rows to the same
// transaction as every write.
//
// Import rule: state imports only the standard library and starflowtype.
// Adapters (state/sqlitestore, state/nullstore, …) import state; state never
// imports an adapter or the engine.
//
// Method names follow the seed's boundary methods (onRunStart, writeLease,
// refreshLease, onNodeStart, onNodeComplete, onNodeError, onRunComplete,
// onRunError, clearLease, recordPhaseIfChanged, expireOldLeases). Where the
// spec requires several writes to be atomic one method does them all: for
// example OnNodeComplete writes the ledger row, the node_complete event and
// the checkpoint in one transaction.
package state
