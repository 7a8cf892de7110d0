// Package workload holds what the side-by-side harness shares between
// the systems it measures: the workload's shape, a measurement's
// configuration and result, producers, and store helpers.
//
// Import rule: the standard library, pgx and modernc.org/sqlite only; no
// system under test.
package workload
