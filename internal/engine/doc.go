// Package engine is the interpreter: it executes one claimed run of a
// definition, step by step, writing every lifecycle moment to the cold
// store through a fenced, secret-scrubbing ledger writer, and restoring
// (instead of re-executing) every step instance that already has a
// checkpoint in the current attempt.
//
// The engine does not claim runs or hold leases; internal/runner does and
// calls Engine.Execute with a context that is cancelled (with a cause) when
// the lease is lost or the runner stops.
//
// Import rule: imports state, starflowtype, step, workflow and internal
// packages; never a concrete store.
package engine
