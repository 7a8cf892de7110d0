// Package stucktest puts runs in every why-stuck state, for real, on a
// store a test gives it: workflows that wait on a signal, a timer, an
// approval and a child run; a step between two tries and a run between
// two attempts; a queued run no runner serves and one queued behind
// another; a run whose runner was lost before the sweep saw it; one held
// for an operator after its runner was lost; and one an operator asked to
// cancel while its step is in flight. The engine API tests, the HTTP API
// tests, the CLI tests and the dashboard's browser tests share it, so
// each checks the same ten states (TestStuckReasons and its relatives).
//
// Import rule: imports the root package, state, step and starflowtype;
// imported by tests only.
package stucktest
