package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/steps"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// reservedPrefix names engine internals in variables (SPEC §2).
const reservedPrefix = "__celestial"

// runKind executes one try of a step's kind and returns its raw output and
// the context keys it changed.
func (rs *runState) runKind(ctx context.Context, f *frame, s *workflow.Step, try int) (any, map[string]any, error) {
	switch {
	case s.ContextSet != nil:
		return rs.contextSet(ctx, f, s)
	case s.Fail != nil:
		return nil, nil, rs.failStep(ctx, f, s.Fail)
	case s.Pass != nil:
		out, err := rs.render(ctx, f, "pass", s.Pass.Value)
		return out, nil, err
	case s.ServiceCall != nil:
		out, err := rs.serviceCall(ctx, f, s)
		return out, nil, err
	case s.Custom != nil:
		out, err := rs.custom(ctx, f, s, try)
		return out, nil, err
	case s.SessionRead != nil:
		out, err := rs.sessionRead(ctx, f, s)
		return out, nil, err
	case s.SessionWrite != nil:
		out, err := rs.sessionWrite(ctx, f, s)
		return out, nil, err
	}
	return nil, nil, step.Permanent(fmt.Errorf("step %s has no kind this engine can execute", s.ID))
}

// failStep renders a fail step's typed error: message, type (default
// fail) and details. It is not retried by default, whatever its type (a
// fail step fails the same way every time).
func (rs *runState) failStep(ctx context.Context, f *frame, fl *workflow.Fail) error {
	msg, err := rs.render(ctx, f, "fail.message", fl.Message)
	if err != nil {
		return err
	}
	text, ok := msg.(string)
	if !ok {
		b, _ := json.Marshal(msg)
		text = string(b)
	}
	info := starflowtype.ErrorInfo{Type: starflowtype.ErrorFail, Message: text}
	if fl.Type != "" {
		t, err := rs.render(ctx, f, "fail.type", fl.Type)
		if err != nil {
			return err
		}
		ts, isString := t.(string)
		switch {
		case t == nil || ts == "" && isString: // the default type
		case !isString:
			return exprError(fmt.Errorf("fail.type must yield a string, got %s", jsonType(t)))
		case !workflow.ValidErrorType(ts):
			return exprError(fmt.Errorf("fail.type %q is not an error type: it must match [A-Za-z_][A-Za-z0-9_.:-]* and be at most 128 characters", ts))
		default:
			info.Type = ts
		}
	}
	if fl.Details != nil {
		d, err := rs.render(ctx, f, "fail.details", fl.Details)
		if err != nil {
			return err
		}
		info.Details = d
	}
	return &typedError{info: info, final: true, err: step.Permanent(errors.New(text))}
}

// contextSet evaluates every value first, then sets them all: the output
// is the map of keys set to their new values, which is also the delta.
func (rs *runState) contextSet(ctx context.Context, f *frame, s *workflow.Step) (any, map[string]any, error) {
	delta := make(map[string]any, len(s.ContextSet))
	for k, v := range s.ContextSet {
		if strings.HasPrefix(k, reservedPrefix) {
			return nil, nil, step.Permanent(fmt.Errorf("context_set may not write the reserved key %q", k))
		}
		val, err := rs.render(ctx, f, "context_set."+k, v)
		if err != nil {
			return nil, nil, err
		}
		delta[k] = val
	}
	out := make(map[string]any, len(delta))
	for k, v := range delta {
		out[k] = v
	}
	return out, delta, nil
}

func (rs *runState) serviceCall(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	sc, scope := s.ServiceCall, f.scope
	req := &steps.HTTPRequest{
		Method:         sc.Method,
		ExpectStatus:   sc.ExpectStatus,
		IdempotencyKey: idempotencyKey(rs.run.ID, scope, s.ID),
		FencingToken:   fmt.Sprintf("%s/%d", rs.run.ID, rs.led.lease.Epoch),
		Redactor:       rs.led.red,
		Propagator:     rs.e.cfg.Propagator,
	}
	u, err := rs.render(ctx, f, "service_call.url", sc.URL)
	if err != nil {
		return nil, err
	}
	if req.URL, err = asString("service_call.url", u); err != nil {
		return nil, err
	}
	if req.Headers, err = rs.renderStrings(ctx, f, "service_call.headers", sc.Headers); err != nil {
		return nil, err
	}
	if req.Query, err = rs.renderStrings(ctx, f, "service_call.query", sc.Query); err != nil {
		return nil, err
	}
	if sc.Body != nil {
		if req.Body, err = rs.render(ctx, f, "service_call.body", sc.Body); err != nil {
			return nil, err
		}
		req.HasBody = true
	}
	return steps.Call(ctx, rs.e.cfg.HTTPClient, req)
}

func (rs *runState) renderStrings(ctx context.Context, f *frame, what string, m map[string]any) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := rs.render(ctx, f, what+"."+k, v)
		if err != nil {
			return nil, err
		}
		if out[k], err = asString(what+"."+k, x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func asString(what string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", step.Permanent(fmt.Errorf("%s: %w", what, err))
		}
		return string(b), nil
	}
}

func (rs *runState) custom(ctx context.Context, f *frame, s *workflow.Step, try int) (any, error) {
	scope := f.scope
	fn := rs.e.cfg.Registry.get(s.Custom.Type)
	if fn == nil {
		return nil, step.Permanent(fmt.Errorf("step type %q is not registered in this process", s.Custom.Type))
	}
	input, err := rs.render(ctx, f, s.Custom.Type, s.Custom.Input)
	if err != nil {
		return nil, err
	}
	req := &step.Request{
		RunID: rs.run.ID, Workflow: rs.run.WorkflowName, StepID: s.ID, ScopePath: scope,
		Attempt: rs.run.Attempt, Try: try, Input: input,
		IdempotencyKey: idempotencyKey(rs.run.ID, scope, s.ID),
		FencingToken:   fmt.Sprintf("%s/%d", rs.run.ID, rs.led.lease.Epoch),
		Lease:          rs.led.lease,
		Logger:         rs.log.With("step", s.ID, "scope_path", scope),
		Progress: func(f float64, msg string) {
			rs.e.cfg.Progress(rs.run.ID, scope, s.ID, f, rs.led.red.String(msg))
		},
	}
	out, err := callHandler(ctx, fn, req)
	if err != nil {
		if step.IsPermanent(err) {
			return nil, final{err} // no retry_on retries it
		}
		return nil, err
	}
	// Normalise to plain JSON values so CEL and checkpoints see the same
	// thing a resumed run will restore.
	b, merr := jsonvalue.Encode(out)
	if merr != nil {
		return nil, step.Permanent(fmt.Errorf("step output does not encode as JSON: %w", merr))
	}
	return jsonvalue.Decode(b)
}

// callHandler runs a handler, turning a panic into a permanent step error
// so that one bad handler cannot take the runner down.
func callHandler(ctx context.Context, fn step.Func, req *step.Request) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = step.Permanent(fmt.Errorf("step handler panicked: %v", p))
		}
	}()
	return fn(ctx, req)
}

// idempotencyKey is "<run_id>/<scope_path>/<step_id>" (SPEC §2).
func idempotencyKey(runID, scope, stepID string) string {
	return runID + "/" + scope + "/" + stepID
}
