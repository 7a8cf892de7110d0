// Package steps implements the built-in step kinds whose work is not the
// engine's own bookkeeping: service_call (an HTTP request).
// context_set and fail only touch the run's context and live in the engine.
//
// Import rule: standard library, step, starflowtype, and internal/egress,
// internal/jsonvalue and internal/redact.
package steps
