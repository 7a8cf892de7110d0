// Package runner claims queued runs and executes them under fenced leases:
// the claim loop, one heartbeat per run in flight, cancellation of a run's
// context the moment its lease is lost, and graceful stop.
//
// The same Runner serves `starflow run` (in-process, on SQLite), `starflow
// dev` and `starflow worker`: there is no other path by which a run
// executes.
//
// Import rule: imports state, starflowtype, internal/engine and the
// Prometheus client (metrics.go); never a concrete store.
package runner
