package starflow

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/starflow/starflow/internal/engine"
)

// tracer is the engine's tracer from TracerProvider (default the global
// provider's).
func (c Config) tracer() trace.Tracer {
	tp := c.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(engine.TracerName)
}

// ExtractTrace returns ctx carrying the trace context of header (the
// traceparent and tracestate of an HTTP request, read with
// Config.Propagator): an Enqueue with the returned context makes the new
// run's trace a child of the caller's span. A header without a valid
// trace context returns ctx unchanged.
func (e *Engine) ExtractTrace(ctx context.Context, header http.Header) context.Context {
	return e.engine.ExtractTrace(ctx, header)
}
