// Package sfbench measures Starflow through its public Go API only (the
// engine, state/pgstore, state/sqlitestore, and the starflow binary): the
// side-by-side throughput, enqueue→first-step latency, recovery after
// SIGKILL, and the pgbench floor of its per-step writes. It imports no
// peer system, so `go vet ./internal/...` in bench/ checks the harness
// against the engine's API without building the peers.
//
// Import rule: the root package github.com/starflow/starflow, its public
// state, state/pgstore, state/sqlitestore and step packages, and
// bench/internal/workload; never internal/… of the engine, never a peer.
package sfbench
