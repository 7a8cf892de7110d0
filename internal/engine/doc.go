// Package engine is the interpreter: it executes one claimed run of a
// definition, step by step, writing every lifecycle moment to the cold
// store through a fenced, secret-scrubbing ledger writer, and restoring
// (instead of re-executing) every step instance that already has a
// checkpoint in the current attempt (and, in resume recovery mode, in
// earlier attempts).
//
// The control-flow constructs (constructs.go, concurrent.go) run their
// nested steps lists in frames (frames.go): every loop iteration, item and
// lane in a scope path and a context of its own whose changes are merged
// back in a fixed order. A construct is itself a step instance with a
// ledger row and a checkpoint, so a finished construct is restored in one
// piece and an unfinished one is re-entered, restoring what it had
// checkpointed inside.
//
// The engine does not claim runs or hold leases; internal/runner does and
// calls Engine.Execute with a context that is cancelled (with a cause) when
// the lease is lost or the runner stops.
//
// Import rule: imports state, starflowtype, step, workflow, internal
// packages and the Prometheus client (metrics.go); never a concrete store.
package engine
