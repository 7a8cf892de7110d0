// Package otelenv configures OpenTelemetry tracing for the starflow
// binary from the standard OTEL_* environment variables (the
// OpenTelemetry SDK's environment specification). Tracing is off unless
// an exporter is named (OTEL_TRACES_EXPORTER) or an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); it
// stays off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
//
// Only cmd/starflow imports it: a program embedding the engine passes its
// own provider in starflow.Config.TracerProvider. It imports the
// OpenTelemetry SDK and exporters, and nothing of Starflow's.
package otelenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceNameDefault is the resource's service.name unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceNameDefault = "starflow"

// Tracing is the tracing of one process: its provider (a no-op when
// tracing is off), propagator, and what to flush at exit.
type Tracing struct {
	// Provider makes the spans; a no-op provider when tracing is off.
	Provider trace.TracerProvider
	// Propagator is OTEL_PROPAGATORS' (default tracecontext,baggage).
	Propagator propagation.TextMapPropagator
	// Exporter names the exporter in use ("otlp (http/protobuf)",
	// "otlp (grpc)", "console"), "" when tracing is off.
	Exporter string
	sdk      *sdktrace.TracerProvider
}

// On reports whether spans are exported.
func (t *Tracing) On() bool { return t.sdk != nil }

// Shutdown flushes the spans not yet exported and stops the exporter,
// giving up when ctx ends. Safe when tracing is off, and to call twice.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("opentelemetry: flushing spans: %w", err)
	}
	return nil
}

// FromEnv builds the process's tracing from the environment (getenv,
// normally os.Getenv; the SDK and exporters read the variables they
// document — OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER, OTEL_BSP_* — from
// the process environment themselves). console writes the spans, one
// JSON document each, to console (the CLI: stderr, so that stdout stays
// the command's). Errors name the variable that is wrong: an exporter or
// protocol it does not know, a resource attribute list that does not
// parse, a propagator it does not know.
func FromEnv(ctx context.Context, getenv func(string) string, console io.Writer) (*Tracing, error) {
	prop, err := autoprop.TextMapPropagator()
	if err != nil {
		return nil, fmt.Errorf("OTEL_PROPAGATORS: %w", err)
	}
	t := &Tracing{Provider: noop.NewTracerProvider(), Propagator: prop}
	exporter := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER")))
	if exporter == "" && (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		exporter = "otlp"
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") || exporter == "" || exporter == "none" {
		return t, nil
	}
	var exp sdktrace.SpanExporter
	switch exporter {
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
		t.Exporter = "console"
	case "otlp":
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch proto {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
			t.Exporter = "otlp (http/protobuf)"
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
			t.Exporter = "otlp (grpc)"
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", proto)
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: want otlp, console or none", exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("opentelemetry %s exporter: %w", exporter, err)
	}
	// Later options win: the default name, then the environment's.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", ServiceNameDefault)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES: %w", err), exp.Shutdown(ctx))
	}
	t.sdk = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.Provider = t.sdk
	return t, nil
}
