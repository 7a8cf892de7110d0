package engine

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// Traces (issue 16; docs/operations.md "Traces", decisions 200–209).
//
// A run is one trace. Its enqueue span ("enqueue <workflow>", kind
// producer) is a child of the caller's span when the enqueue's context
// carries one (an API request's traceparent, an embedding program's span,
// the parent run's workflow_call step), else the root of a new trace; the
// run stores the trace id and the enqueue span's traceparent
// (workflow_runs.trace_id, trace_parent). Every execution of the run —
// each claim: the first, a continuation after a wait or a graceful
// release, a recovery after a crash, a later attempt — is a span
// ("run <workflow>", kind consumer) whose parent is that enqueue span, so
// the executions sit side by side in the one trace. Below an execution,
// every step instance it executes is a span ("<kind> <step id>"), nested
// as the definition nests: a construct's span holds the spans of its for_each
// items, parallel lanes and repeat_until iterations ("item <id>",
// "lane <id>", "iteration <id>"), which hold their steps' spans. A step
// restored from its checkpoint is not executed and has no span. Each
// failed try that is retried is an event ("retry") on its step's span.
//
// Nothing secret goes into a span: attributes are ids, names, kinds and
// counts; error messages pass through the run's redactor, as everything
// the engine stores does.
//
// With the no-op tracer (tracing off) no span is recorded: Start costs a
// context value and attributes are not built (IsRecording), and the
// enqueue stores no trace.

// TracerName is the instrumentation scope of the engine's spans.
const TracerName = "github.com/starflow/starflow"

// Span attributes (see docs/operations.md, "Traces").
const (
	attrRunID         = attribute.Key("starflow.run_id")
	attrWorkflow      = attribute.Key("starflow.workflow")
	attrRevision      = attribute.Key("starflow.revision")
	attrAttempt       = attribute.Key("starflow.attempt")
	attrClaimAttempts = attribute.Key("starflow.claim_attempts")
	attrTrigger       = attribute.Key("starflow.trigger")
	attrParentRunID   = attribute.Key("starflow.parent_run_id")
	attrRunner        = attribute.Key("starflow.runner_id")
	attrOutcome       = attribute.Key("starflow.outcome")
	attrStepID        = attribute.Key("starflow.step_id")
	attrScopePath     = attribute.Key("starflow.scope_path")
	attrStepKind      = attribute.Key("starflow.step_kind")
	attrTries         = attribute.Key("starflow.tries")
	attrStepStatus    = attribute.Key("starflow.step_status")
	attrChildRunID    = attribute.Key("starflow.child_run_id")
	attrTry           = attribute.Key("starflow.try")
	attrBackoffMS     = attribute.Key("starflow.backoff_ms")
	attrError         = attribute.Key("starflow.error")
	attrErrorType     = attribute.Key("error.type")
)

// DefaultPropagator is the propagator of Config.Propagator's default:
// the global one (otel.SetTextMapPropagator) when the program set one,
// else W3C trace context and baggage (traceparent, tracestate, baggage).
func DefaultPropagator() propagation.TextMapPropagator {
	if g := otel.GetTextMapPropagator(); len(g.Fields()) > 0 {
		return g
	}
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// traceDefaults fills Config.Tracer and Config.Propagator.
func traceDefaults(t trace.Tracer, p propagation.TextMapPropagator) (trace.Tracer, propagation.TextMapPropagator) {
	if t == nil {
		t = otel.Tracer(TracerName)
	}
	if p == nil {
		p = DefaultPropagator()
	}
	return t, p
}

// TraceEnqueue starts the enqueue span of the run p describes (a child of
// ctx's span, when ctx carries one) and records the run's trace in p:
// TraceID and TraceParent. When the tracer made no span of its own
// (tracing off, whatever ctx carries) p is left without a trace. The
// caller ends the span.
func (e *Engine) TraceEnqueue(ctx context.Context, p *state.EnqueueRunParams) trace.Span {
	parent := trace.SpanContextFromContext(ctx)
	_, span := e.cfg.Tracer.Start(ctx, "enqueue", trace.WithSpanKind(trace.SpanKindProducer))
	sc := span.SpanContext()
	if !sc.IsValid() || sc.SpanID() == parent.SpanID() {
		return span // a no-op tracer hands back the caller's span context
	}
	p.TraceID = sc.TraceID().String()
	p.TraceParent = "00-" + p.TraceID + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
	if span.IsRecording() {
		span.SetName("enqueue " + p.WorkflowName)
		span.SetAttributes(attrWorkflow.String(p.WorkflowName), attrRevision.String(p.WorkflowRevision),
			attrTrigger.String(string(p.TriggerType)))
		if p.ID != "" {
			span.SetAttributes(attrRunID.String(p.ID))
		}
		if p.ParentRunID != "" {
			span.SetAttributes(attrParentRunID.String(p.ParentRunID))
		}
	}
	return span
}

// runTrace is the span of one execution of a run.
type runTrace struct {
	span trace.Span
	red  *redact.Redactor // the run's, once its secrets are known
}

// traceRun starts the span of one execution of run, a child of the run's
// enqueue span (its stored traceparent; none: a root).
func (e *Engine) traceRun(ctx context.Context, run *starflowtype.Run, lease starflowtype.Lease) (context.Context, *runTrace) {
	if run.TraceParent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": run.TraceParent})
	}
	ctx, span := e.cfg.Tracer.Start(ctx, "run", trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetName("run " + run.WorkflowName)
		span.SetAttributes(attrRunID.String(run.ID), attrWorkflow.String(run.WorkflowName),
			attrRevision.String(run.WorkflowRevision), attrAttempt.Int(run.Attempt),
			attrClaimAttempts.Int(run.ClaimAttempts), attrTrigger.String(string(run.TriggerType)),
			attrRunner.String(lease.RunnerID))
		if run.ParentRunID != "" {
			span.SetAttributes(attrParentRunID.String(run.ParentRunID))
		}
	}
	return ctx, &runTrace{span: span}
}

// result records how the execution's steps ended: err (from
// runState.execute) fails the span unless the run parked, stopped or was
// cancelled.
func (t *runTrace) result(rs *runState, err error) {
	t.red = rs.led.red
	if err == nil || !t.span.IsRecording() || errors.Is(err, starflowtype.ErrCancelRequested) || rs.stopping(err) {
		return
	}
	msg := t.red.Error(err)
	t.span.SetStatus(codes.Error, msg)
	var sf *stepFailed
	if errors.As(err, &sf) && sf.info != nil {
		t.span.SetAttributes(attrErrorType.String(sf.info.Type))
	}
}

// end ends the span with Execute's outcome; an error recording it (a
// lost lease, a store failure) fails the span.
func (t *runTrace) end(outcome Outcome, err error) {
	if t.span.IsRecording() {
		t.span.SetAttributes(attrOutcome.String(string(outcome)))
		if err != nil {
			t.span.SetStatus(codes.Error, t.red.Error(err))
		}
	}
	t.span.End()
}

// traceStep executes (or restores) step s in frame f under a span of its
// own: execStep with tracing.
func (rs *runState) traceStep(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	if _, ok := rs.restored[f.scope+"\x00"+s.ID]; ok {
		return rs.execStep(ctx, f, s) // restored, not executed: no span
	}
	ctx, span := rs.e.cfg.Tracer.Start(ctx, "step")
	if !span.IsRecording() {
		return rs.execStep(ctx, f, s) // the context still carries the run's trace (propagation)
	}
	kind := s.Kind()
	span.SetName(kind + " " + s.ID)
	span.SetAttributes(attrRunID.String(rs.run.ID), attrWorkflow.String(rs.run.WorkflowName),
		attrRevision.String(rs.run.WorkflowRevision), attrAttempt.Int(rs.run.Attempt),
		attrStepID.String(s.ID), attrScopePath.String(f.scope), attrStepKind.String(kind),
		attrTries.Int(rs.firstTry(f.scope, s)))
	if s.WorkflowCall != nil {
		span.SetAttributes(attrChildRunID.String(ChildRunID(rs.run.ID, f.scope, s.ID)))
	}
	out, err := rs.execStep(ctx, f, s)
	rs.endSpan(span, err)
	status := string(starflowtype.StepSucceeded)
	if m, ok := f.steps[s.ID].(map[string]any); ok {
		status, _ = m["status"].(string)
	}
	switch {
	case errors.Is(err, errParked) && !rs.realStop(err):
		status = string(starflowtype.StepWaiting)
	case err != nil && rs.stopping(err):
		status = "stopped" // the run stopped (shutdown, lost lease, cancel): continued or swept
	}
	span.SetAttributes(attrStepStatus.String(status))
	if status == string(starflowtype.StepSkipped) {
		span.SetAttributes(attrTries.Int(0))
	}
	span.End()
	return out, err
}

// firstTry is the try an execution of step s starts with: a construct or
// a durable wait re-entered keeps the try of its open row (tries.go).
func (rs *runState) firstTry(scope string, s *workflow.Step) int {
	if s.IsConstruct() || s.Wait != nil || s.WorkflowCall != nil || s.Job != nil {
		if try := rs.openTry(scope, s.ID); try > 0 {
			return try
		}
	}
	return rs.priorTries(scope, s.ID) + 1
}

// traceList runs one nested list of construct s (a for_each item, a
// parallel lane, a repeat_until iteration: what is "item", "lane" or
// "iteration") in frame f under a span of its own: execList with tracing.
func (rs *runState) traceList(ctx context.Context, f *frame, list []*workflow.Step, what string, s *workflow.Step) (any, error) {
	ctx, span := rs.e.cfg.Tracer.Start(ctx, what)
	if !span.IsRecording() {
		return rs.execList(ctx, f, list)
	}
	span.SetName(what + " " + s.ID)
	span.SetAttributes(attrStepID.String(s.ID), attrScopePath.String(f.scope), attrStepKind.String(what))
	out, err := rs.execList(ctx, f, list)
	rs.endSpan(span, err)
	span.End()
	return out, err
}

// endSpan sets the status of a step's (or a nested list's) span from the
// error it ended with: a failure is an error with its scrubbed message;
// the run stopping or parking is not.
func (rs *runState) endSpan(span trace.Span, err error) {
	if err == nil || rs.stopping(err) {
		return
	}
	span.SetStatus(codes.Error, rs.led.red.Error(err))
	var sf *stepFailed
	if errors.As(err, &sf) && sf.info != nil {
		span.SetAttributes(attrErrorType.String(sf.info.Type))
	}
}

// traceRetry records a failed try that is retried after backoff as an
// event of the step's span (ctx's), and the next try as its tries.
func (rs *runState) traceRetry(ctx context.Context, try int, backoffMS int64, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	info, _ := classify(err)
	span.AddEvent("retry", trace.WithAttributes(attrTry.Int(try), attrBackoffMS.Int64(backoffMS),
		attrErrorType.String(info.Type), attrError.String(rs.led.red.Error(err))))
	span.SetAttributes(attrTries.Int(try + 1))
}

// withSpan returns dst carrying src's span: a write made under a context
// of its own (not cancelled with the step) stays in the step's trace.
func withSpan(dst, src context.Context) context.Context {
	return trace.ContextWithSpan(dst, trace.SpanFromContext(src))
}

// injectTrace writes ctx's trace context into h (traceparent, tracestate,
// baggage: Config.Propagator) for a service_call or notify request.
func (e *Engine) injectTrace(ctx context.Context, h http.Header) {
	e.cfg.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractTrace returns ctx carrying the trace context in h (read with
// Config.Propagator), unchanged when h carries none.
func (e *Engine) ExtractTrace(ctx context.Context, h http.Header) context.Context {
	return e.cfg.Propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
