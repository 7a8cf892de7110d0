package starflowtype

import "encoding/json"

// Built-in error types (SPEC §2 "Errors"): the Type of an ErrorInfo. A
// custom step's handler may return any other type (step.Error).
const (
	ErrorHTTP                  = "http"                    // an unexpected response status; Status and Body set
	ErrorNetwork               = "network"                 // the request did not get an answer: refused, reset, DNS, TLS
	ErrorTimeout               = "timeout"                 // a step's or a construct's timeout passed
	ErrorExpression            = "expression"              // an expression did not evaluate, or gave the wrong type
	ErrorEgressRefused         = "egress_refused"          // the egress policy refused the connection or a redirect
	ErrorInputInvalid          = "input_invalid"           // an input (a child run's, a step's) breaks its schema or shape
	ErrorMaxIterationsExceeded = "max_iterations_exceeded" // repeat_until ran max_iterations without until becoming true
	ErrorChildFailed           = "child_failed"            // a workflow_call's child run failed or was cancelled; Cause set
	ErrorCancelled             = "cancelled"               // cancelled: a race lost, a fail_fast sibling lane, a cancelled wait
	ErrorFail                  = "fail"                    // a fail step without a type of its own
	// ErrorUntyped is the type of a failure that carries none: a custom
	// step's handler returned a plain Go error, or the engine failed
	// outside any step kind.
	ErrorUntyped = "error"
)

// ErrorInfo is a typed failure: what a try's catch sees as `error`, what
// retry_on and catch_when test, what the API gives as a run's `error`, and
// what a child run's failure hands its parent as `cause`. Fields that do
// not apply are omitted from its JSON (step_id and scope_path are left out
// of a failure that is not a step's).
//
// JSON shape: {type, message, step_id, scope_path, status, body, cause,
// details}. Body is the response body of an http error (parsed when it is
// JSON, scrubbed of secrets, at most 64 KiB); Details is what a fail step
// or a custom step's handler attached (any JSON value).
type ErrorInfo struct {
	Type      string     `json:"type"`
	Message   string     `json:"message"`
	StepID    string     `json:"step_id,omitempty"`
	ScopePath *string    `json:"scope_path,omitempty"` // nil when StepID is ""; "" is the root scope
	Status    int        `json:"status,omitempty"`
	Body      any        `json:"body,omitempty"`
	Cause     *ErrorInfo `json:"cause,omitempty"`
	Details   any        `json:"details,omitempty"`
}

// ParseErrorInfo decodes a stored error object (workflow_runs.error_json);
// nil when b is empty or not an error object.
func ParseErrorInfo(b json.RawMessage) *ErrorInfo {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	var e ErrorInfo
	if json.Unmarshal(b, &e) != nil || e.Type == "" {
		return nil
	}
	return &e
}

// UnmarshalJSON reads an error object, or a bare string (what a run's
// `error` was before typed errors) as {type: "error", message: it}.
func (e *ErrorInfo) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*e = ErrorInfo{Type: ErrorUntyped, Message: s}
		return nil
	}
	type plain ErrorInfo
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = ErrorInfo(p)
	return nil
}
