package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/starflow/starflow/internal/otelenv"
)

// flushTimeout bounds the export of the spans left when a command ends.
const flushTimeout = 5 * time.Second

// processTracing is the OpenTelemetry tracing of a command that runs an
// engine (dev, server, worker, run).
type processTracing struct {
	*otelenv.Tracing
	log *slog.Logger
}

// startTracing configures tracing from the OTEL_* environment (off unless
// an exporter or an OTLP endpoint is set; docs/operations.md "Traces");
// the console exporter writes to stderr. The SDK's own errors (an
// unreachable collector) go to log as warnings.
func startTracing(ctx context.Context, log *slog.Logger) (*processTracing, error) {
	t, err := otelenv.FromEnv(ctx, os.Getenv, os.Stderr)
	if err != nil {
		return nil, err
	}
	if t.On() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("opentelemetry", "error", err)
		}))
		log.Info("tracing on", "exporter", t.Exporter)
	}
	return &processTracing{Tracing: t, log: log}, nil
}

// flush exports the spans not yet exported (at most flushTimeout).
func (t *processTracing) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		t.log.Warn("spans not exported", "error", err)
	}
}
