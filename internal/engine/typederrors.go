package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/expr"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/steps"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

// Typed errors (SPEC §2 "Errors"; issue 14).
//
// Every failure of a step instance has a type, decided once, where the
// failure is recorded (rs.fail): classify reads it from the Go error the
// step ended with — a *typedError the engine made (expression, fail,
// timeout, child_failed, cancelled, …), a handler's *step.Error, an
// unexpected response (*steps.StatusError: http, with status and body),
// a *steps.NetworkError, an egress refusal — and says whether the failure
// is transient by default (network, timeout, http 5xx and 429, a custom
// step's Retryable). The resulting starflowtype.ErrorInfo travels with
// the failure (stepFailed.info): a construct that fails because a step
// inside it failed carries that step's error unchanged, so a catch, a
// catch_when, the run's error_json and a parent's child_failed cause all
// see the failure where it arose.

// typedError is a failure whose type the engine decided where it arose.
// err is the failure itself (its text is the message; errors.Is and As see
// through); info holds the type and the fields that go with it.
type typedError struct {
	info      starflowtype.ErrorInfo
	retryable bool
	// final: no retry_on retries it (an expression error, a fail step:
	// they fail the same way every time).
	final bool
	err   error
}

func (e *typedError) Error() string { return e.err.Error() }
func (e *typedError) Unwrap() error { return e.err }

// typed gives err the type typ; it is permanent (not retried by default).
func typed(typ string, err error) error {
	return &typedError{info: starflowtype.ErrorInfo{Type: typ}, err: step.Permanent(err)}
}

// exprError is an expression's failure: type expression, permanent (an
// expression fails the same way every time).
func exprError(err error) error {
	var c *expr.CancelledError
	if errors.As(err, &c) {
		return c.Cause // the evaluation was cut off by a cancellation: that is the failure
	}
	return &typedError{info: starflowtype.ErrorInfo{Type: starflowtype.ErrorExpression}, final: true, err: step.Permanent(err)}
}

// isFinal reports whether no retry_on may retry err: a handler's
// step.Permanent, an expression error, a fail step.
func isFinal(err error) bool {
	var fin final
	var te *typedError
	return errors.As(err, &fin) || errors.As(err, &te) && te.final
}

// stepTimeout is the cancellation cause of a step's (or a construct's)
// own timeout: type timeout, transient.
func stepTimeout(format string, args ...any) error {
	return &typedError{info: starflowtype.ErrorInfo{Type: starflowtype.ErrorTimeout}, retryable: true, err: fmt.Errorf(format, args...)}
}

// final marks the error of a handler that returned step.Permanent: no
// retry_on retries it.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// classify returns the type and fields of a failure (StepID and ScopePath
// not set), and whether it is transient: what the default retry_on says.
func classify(err error) (starflowtype.ErrorInfo, bool) {
	var te *typedError
	var se *step.Error
	var status *steps.StatusError
	var network *steps.NetworkError
	var refused *egress.RefusedError
	var redirect *egress.RedirectError
	var lc *laneCancelled
	var rl *raceLost
	switch {
	case errors.As(err, &te):
		info := te.info
		if info.Message == "" {
			info.Message = err.Error() // with what was said around it ("… (deciding whether to retry: …)")
		}
		return info, te.retryable
	case errors.As(err, &se):
		info := starflowtype.ErrorInfo{Type: se.Type, Message: se.Message, Details: plain(se.Details)}
		if info.Type == "" {
			info.Type = starflowtype.ErrorUntyped
		}
		if info.Message == "" {
			info.Message = err.Error()
		}
		return info, se.Retryable && !step.IsPermanent(err)
	case errors.As(err, &status):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorHTTP, Message: status.Error(), Status: status.Status, Body: status.Payload}, status.Retryable()
	case errors.As(err, &refused), errors.As(err, &redirect):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorEgressRefused, Message: err.Error()}, false
	case errors.As(err, &network):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorNetwork, Message: err.Error()}, true
	case errors.As(err, &lc), errors.As(err, &rl):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorCancelled, Message: err.Error()}, false
	case errors.Is(err, context.DeadlineExceeded):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorTimeout, Message: err.Error()}, true
	case errors.Is(err, starflowtype.ErrInvalid):
		return starflowtype.ErrorInfo{Type: starflowtype.ErrorInputInvalid, Message: err.Error()}, false
	}
	return starflowtype.ErrorInfo{Type: starflowtype.ErrorUntyped, Message: err.Error()}, !step.IsPermanent(err)
}

// plain normalises a handler's value to plain JSON values (nil when it
// does not encode).
func plain(v any) any {
	if v == nil {
		return nil
	}
	b, err := jsonvalue.Encode(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	out, err := jsonvalue.Decode(b)
	if err != nil {
		return nil
	}
	return out
}

// stepError returns the failure err of step stepID (of kind kind, in
// scope) as it propagates: the error of the innermost step that failed
// when err wraps one (a construct failing because a step inside it
// failed), else err's own type with the step's id and scope, scrubbed of
// the run's secrets.
func (rs *runState) stepError(stepID, kind, scope string, err error) (*starflowtype.ErrorInfo, string, bool, bool) {
	var inner *stepFailed
	if errors.As(err, &inner) {
		return inner.info, inner.innerKind, inner.retryable, inner.final
	}
	info, retryable := classify(err)
	info.StepID, info.ScopePath = stepID, &scope
	return rs.scrubInfo(&info), kind, retryable, isFinal(err)
}

// scrubInfo returns info with the run's secrets scrubbed from every string
// in it (message, body, details, cause).
func (rs *runState) scrubInfo(info *starflowtype.ErrorInfo) *starflowtype.ErrorInfo {
	m, _ := rs.led.red.Value(infoMap(info)).(map[string]any)
	return mapInfo(m)
}

// errorFields are the fields of the error object (SPEC §2).
var errorFields = []string{"type", "message", "step_id", "scope_path", "status", "body", "cause", "details"}

// errorRecord is the value expressions see as `error`: the error object's
// fields (absent ones omitted, as in its JSON), every one of which reads
// as null when absent (error.details can be passed on as it is), plus
// kind, the failed step's kind (kept from before typed errors).
func errorRecord(info *starflowtype.ErrorInfo, kind string) *expr.Record {
	m := infoMap(info)
	if kind != "" {
		m["kind"] = kind
	}
	return expr.NewRecord(m, errorFields...)
}

// infoMap is info as plain JSON values (the fields present), its body
// and details as they are: decoded JSON, whose numbers keep their type
// (an int stays an int, 1.0 a double), which a trip through a struct's
// JSON would lose.
func infoMap(info *starflowtype.ErrorInfo) map[string]any {
	if info == nil {
		return map[string]any{}
	}
	m := map[string]any{"type": info.Type, "message": info.Message}
	if info.StepID != "" {
		scope := ""
		if info.ScopePath != nil {
			scope = *info.ScopePath
		}
		m["step_id"], m["scope_path"] = info.StepID, scope
	}
	if info.Status != 0 {
		m["status"] = int64(info.Status)
	}
	if info.Body != nil {
		m["body"] = info.Body
	}
	if info.Cause != nil {
		m["cause"] = infoMap(info.Cause)
	}
	if info.Details != nil {
		m["details"] = info.Details
	}
	return m
}

// mapInfo is infoMap's inverse; nil for a map without a type.
func mapInfo(m map[string]any) *starflowtype.ErrorInfo {
	typ, _ := m["type"].(string)
	if typ == "" {
		return nil
	}
	info := &starflowtype.ErrorInfo{Type: typ, Body: m["body"], Details: m["details"]}
	info.Message, _ = m["message"].(string)
	if id, _ := m["step_id"].(string); id != "" {
		scope, _ := m["scope_path"].(string)
		info.StepID, info.ScopePath = id, &scope
	}
	switch st := m["status"].(type) {
	case int64:
		info.Status = int(st)
	case float64:
		info.Status = int(st)
	}
	if c, ok := m["cause"].(map[string]any); ok {
		info.Cause = mapInfo(c)
	}
	return info
}

// runErrorInfo is the typed error a failed run attempt records
// (workflow_runs.error_json) and whether it is transient by default.
func (rs *runState) runErrorInfo(err error) (*starflowtype.ErrorInfo, bool, bool) {
	var sf *stepFailed
	if errors.As(err, &sf) {
		return sf.info, sf.retryable, sf.final
	}
	info, retryable := classify(err)
	return rs.scrubInfo(&info), retryable, isFinal(err)
}

// evalErrorExpr evaluates an expression over `error` (retry_on,
// catch_when) in frame f.
func (rs *runState) evalErrorExpr(ctx context.Context, f *frame, what string, v any, info *starflowtype.ErrorInfo, kind string) (bool, error) {
	restore := f.bind("error", errorRecord(info, kind))
	defer restore()
	ok, err := rs.evalBool(ctx, f, what, v)
	if err != nil {
		return false, err
	}
	return ok, nil
}
