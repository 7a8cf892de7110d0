// Package nullstore is the no-op cold-tier adapter (seed 000's
// NullWorkflowStateAdapter): it stores nothing. Writes succeed and are
// discarded, reads find nothing (ErrNotFound or empty lists), and ClaimRun
// never has a run to claim. Its Capabilities say it is not durable, so the
// conformance suite (state/statetest) runs only the cases that apply.
//
// It is for programs that run workflows without a system of record (tests,
// one-shot tools): nothing survives, nothing is fenced, nothing can be
// resumed. It runs no state.TxHook, since there is no transaction for a
// hook to join.
//
// Import rule: imports the standard library, github.com/google/uuid,
// starflowtype and state; never another adapter or the engine.
package nullstore
