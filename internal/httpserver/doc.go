// Package httpserver is the HTTP listener of `starflow dev` and `starflow
// server` (SPEC §9): GET /healthz (the health answer, JSON), GET /metrics
// (Prometheus exposition), and the live views that read the warm tier
// (GET /live/runs/{id}, GET /live/runs/{id}/events, GET /live/runners),
// and POST /wake/{token}, which wakes a durable wait with its signed wake
// token (SPEC §6; the token is the credential). Errors are RFC 9457
// problem documents.
//
// The handler is a plain http.Handler over a Backend (implemented by
// *starflow.Engine), so a Go program can mount it itself.
//
// Import rule: the standard library, the root package starflow (for its
// Health and live types), package warm, starflowtype, workflow (for the
// payload cap's error) and the Prometheus client; never a store.
package httpserver
