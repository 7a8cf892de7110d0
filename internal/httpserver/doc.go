// Package httpserver is the HTTP listener of `starflow dev` and `starflow
// server` (SPEC §9): GET /healthz (the health answer, JSON), GET /metrics
// (Prometheus exposition), and the live views that read the warm tier
// (GET /live/runs/{id}, GET /live/runs/{id}/events, GET /live/runners),
// and POST /wake/{token}, which wakes a durable wait with its signed wake
// token (SPEC §6; the token is the credential). Errors are RFC 9457
// problem documents.
//
// The handler is a plain http.Handler over a Backend (implemented by
// *starflow.Engine), so a Go program can mount it itself. POST
// /wake/{token} is rate-limited per client IP (Config.WakeRate,
// WakeBurst: 429 with Retry-After). The listener (Bind, Listen) bounds
// every connection with timeouts and a header limit (ServerConfig) and,
// bound to loopback, answers only requests whose Host is one of its names
// (403 otherwise: DNS rebinding). Nothing it answers carries a store's or
// warm store's own error text; that goes to the log.
//
// Import rule: the standard library, the root package starflow (for its
// Health and live types), package warm, starflowtype, workflow (for the
// payload cap's error), internal/jsonvalue, the Prometheus client and
// golang.org/x/time/rate; never a store.
package httpserver
