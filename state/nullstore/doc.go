// Package nullstore is the non-durable cold-tier adapter (seed 000's
// NullWorkflowStateAdapter, made to run workflows): the store core over
// SQLite in memory (sqlitestore with Path sqlitestore.Memory). It does
// everything the durable stores do — claims, leases, fencing, waits and
// wakes, session variables, the outbox, hooks — and passes the same
// conformance suite (state/statetest) but for the close-and-reopen case,
// since nothing survives Close or the process: its Capabilities say it is
// not durable, and an engine on it uses an ephemeral wake-token key.
// Schedules are the exception: their state must outlive the process, so
// the state.Schedules methods refuse with state.ErrSchedulesNeedStore.
//
// It is for programs that run workflows without a system of record
// (tests, one-shot tools). One Store is one private database; two share
// nothing.
//
// Import rule: imports starflowtype, state and state/sqlitestore; never the
// engine.
package nullstore
