package workflow

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/starflow/starflow/internal/expr"
)

// The durable kinds (SPEC §2, §6): wait, workflow_call, and the session
// variable kinds session_read and session_write.

// Wait is a durable pause of the run. Exactly one of Signal, Timer, Until
// and Approval is set. The step's output is the wake payload, or
// {"timed_out": true} when Timeout passed first: a timed-out wait
// succeeds, and later steps test steps.<id>.output.timed_out.
type Wait struct {
	// Signal waits for a named signal (a static name), delivered to the run
	// or, with CorrelationKey, to whichever run waits with that key.
	Signal string `json:"signal,omitempty"`
	// CorrelationKey is a template yielding a string (signal and approval
	// waits only).
	CorrelationKey any `json:"correlation_key,omitempty"`
	// Timer wakes the wait this long after it was registered.
	Timer Duration `json:"timer,omitempty"`
	// Until wakes the wait at a time: an RFC 3339 timestamp, or a template
	// yielding one.
	Until any `json:"until,omitempty"`
	// Approval waits for a human decision (a signal named Approval.Signal,
	// default the step id, or a wake by token).
	Approval *Approval `json:"approval,omitempty"`
	// Timeout ends a signal or approval wait with {"timed_out": true}.
	Timeout Duration `json:"timeout,omitempty"`
	// Notify is POSTed, once the wait is registered, with the wake token.
	// Signal and approval waits only.
	Notify *Notify `json:"notify,omitempty"`
}

// Approval is the approval form of a wait.
type Approval struct {
	Form   map[string]any `json:"form,omitempty"`   // template; sent with the notify request
	Signal string         `json:"signal,omitempty"` // default: the step id
}

// Notify is a wait's notify request: POST URL with Headers and a JSON body
// of Body (an object template) merged with the engine's fields {run_id,
// wait_id, signal, token, wake_url, expires_at} (and form, for an
// approval), which win over Body's keys of the same name.
type Notify struct {
	URL     string         `json:"url"`               // template yielding an absolute http(s) URL
	Headers map[string]any `json:"headers,omitempty"` // name → template
	Body    any            `json:"body,omitempty"`    // template yielding an object
}

// WorkflowCall starts a child run of Workflow and waits durably for its
// end. The output is the child's output; a child that fails or is
// cancelled fails the step (permanently) with the child's error. A
// workflow may call itself: child runs nest at most Limits.ChildDepth
// deep below their root run, and a call deeper than that fails its step
// (permanently) without starting a child.
type WorkflowCall struct {
	Workflow string `json:"workflow"`           // a workflow name (static)
	Input    any    `json:"input,omitempty"`    // template of the child's input (an object); default {}
	Revision string `json:"revision,omitempty"` // "current" (default: the newest applied) or a revision sha256
}

// SessionRead reads a session variable. The output is its value, Default
// when it is absent or expired, or null without Default.
type SessionRead struct {
	Session any `json:"session"`           // template yielding the session id (a string)
	Key     any `json:"key"`               // template yielding the key (a string)
	Default any `json:"default,omitempty"` // template
}

// SessionWrite writes a session variable; the output is the value.
// Without KeepUntil the variable is dropped when the run ends.
type SessionWrite struct {
	Session   any `json:"session"`
	Key       any `json:"key"`
	Value     any `json:"value"`                // template
	KeepUntil any `json:"keep_until,omitempty"` // RFC 3339 timestamp or duration ("24h"), or a template yielding one
}

// Kind of a wait: "signal", "timer" (timer or until) or "approval".
func (w *Wait) Kind() string {
	switch {
	case w.Approval != nil:
		return "approval"
	case w.Timer > 0 || w.Until != nil:
		return "timer"
	}
	return "signal"
}

// SignalName is the signal that wakes the wait: Signal, or the approval's
// signal (default stepID); "" for a timer.
func (w *Wait) SignalName(stepID string) string {
	switch {
	case w.Approval != nil && w.Approval.Signal != "":
		return w.Approval.Signal
	case w.Approval != nil:
		return stepID
	}
	return w.Signal
}

// MarshalJSON writes the wait; template values keep their JSON type.
func (w Wait) MarshalJSON() ([]byte, error) {
	type plain Wait
	c := plain(w)
	c.CorrelationKey, c.Until = canonValue(c.CorrelationKey), canonValue(c.Until)
	return json.Marshal(c)
}

// MarshalJSON writes the approval; template values keep their JSON type.
func (a Approval) MarshalJSON() ([]byte, error) {
	type plain Approval
	c := plain(a)
	c.Form = canonMap(c.Form)
	return json.Marshal(c)
}

// MarshalJSON writes the request; template values keep their JSON type.
func (n Notify) MarshalJSON() ([]byte, error) {
	type plain Notify
	c := plain(n)
	c.Headers, c.Body = canonMap(c.Headers), canonValue(c.Body)
	return json.Marshal(c)
}

// MarshalJSON writes the call; template values keep their JSON type.
func (w WorkflowCall) MarshalJSON() ([]byte, error) {
	type plain WorkflowCall
	c := plain(w)
	c.Input = canonValue(c.Input)
	return json.Marshal(c)
}

// MarshalJSON writes the step kind; template values keep their JSON type.
func (s SessionRead) MarshalJSON() ([]byte, error) {
	type plain SessionRead
	c := plain(s)
	c.Session, c.Key, c.Default = canonValue(c.Session), canonValue(c.Key), canonValue(c.Default)
	return json.Marshal(c)
}

// MarshalJSON writes the step kind; template values keep their JSON type.
func (s SessionWrite) MarshalJSON() ([]byte, error) {
	type plain SessionWrite
	c := plain(s)
	c.Session, c.Key, c.Value, c.KeepUntil = canonValue(c.Session), canonValue(c.Key), canonValue(c.Value), canonValue(c.KeepUntil)
	return json.Marshal(c)
}

// Fields of the durable kinds, in the order messages list them.
var (
	waitFields         = []string{"signal", "correlation_key", "timer", "until", "approval", "timeout", "notify"}
	approvalFields     = []string{"form", "signal"}
	notifyFields       = []string{"url", "headers", "body"}
	workflowCallFields = []string{"workflow", "input", "revision"}
	sessionReadFields  = []string{"session", "key", "default"}
	sessionWriteFields = []string{"session", "key", "value", "keep_until"}
)

// ReservedSignalPrefix starts signal names the engine uses itself (a child
// run's end is delivered as "starflow.child").
const ReservedSignalPrefix = "starflow."

// ValidSignal reports whether s can name a signal: 1 to 200 characters of
// [A-Za-z0-9_.:/-], not starting with ReservedSignalPrefix.
func ValidSignal(s string) bool {
	if s == "" || len(s) > 200 || strings.HasPrefix(s, ReservedSignalPrefix) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/-", c) >= 0) {
			return false
		}
	}
	return true
}

func (d *decoder) signalName(n *vnode, field string) string {
	s, ok := d.str(n, field)
	if !ok {
		return ""
	}
	if !ValidSignal(s) {
		d.errorf(n.pos, "%s %q must be 1 to 200 characters of letters, digits and _ . : / - (and not start with %q)", field, s, ReservedSignalPrefix)
	}
	return s
}

func (d *decoder) wait(n *vnode, at Pos) *Wait {
	w := &Wait{}
	var forms []string
	var timeoutPos, notifyPos, keyPos Pos
	if !d.fields(n, "wait", waitFields, func(p vpair) {
		v := p.val
		switch p.key {
		case "signal":
			forms = append(forms, "signal")
			w.Signal = d.signalName(v, "wait.signal")
		case "correlation_key":
			keyPos = p.keyPos
			w.CorrelationKey = d.scalarTemplate(v, "wait.correlation_key")
		case "timer":
			forms = append(forms, "timer")
			w.Timer, _ = d.duration(v, "wait.timer")
		case "until":
			forms = append(forms, "until")
			w.Until = d.timeTemplate(v, "wait.until", false)
		case "approval":
			forms = append(forms, "approval")
			w.Approval = d.approval(v)
		case "timeout":
			timeoutPos = p.keyPos
			w.Timeout, _ = d.duration(v, "wait.timeout")
		case "notify":
			notifyPos = p.keyPos
			w.Notify = d.notify(v, p.keyPos)
		}
	}) {
		return w
	}
	switch len(forms) {
	case 0:
		d.errorf(at, "wait needs exactly one of signal, timer, until, approval")
		return w
	case 1:
	default:
		d.errorf(at, "wait needs exactly one of signal, timer, until, approval, not %s", strings.Join(forms, " and "))
		return w
	}
	if forms[0] == "timer" || forms[0] == "until" {
		if w.Timeout > 0 {
			d.errorf(timeoutPos, "wait.timeout applies to signal and approval waits; a %s wait ends at its deadline", forms[0])
		}
		if w.Notify != nil {
			d.errorf(notifyPos, "wait.notify applies to signal and approval waits (it delivers the wake token)")
		}
		if w.CorrelationKey != nil {
			d.errorf(keyPos, "wait.correlation_key applies to signal and approval waits")
		}
	}
	return w
}

func (d *decoder) approval(n *vnode) *Approval {
	a := &Approval{}
	if n.kind == vMap && len(n.pairs) == 0 {
		return a
	}
	d.fields(n, "wait.approval", approvalFields, func(p vpair) {
		switch p.key {
		case "form":
			if p.val.kind != vMap {
				d.typeError(p.val, "wait.approval.form", "a mapping")
				return
			}
			a.Form, _ = d.template(p.val, "wait.approval.form").(map[string]any)
		case "signal":
			a.Signal = d.signalName(p.val, "wait.approval.signal")
		}
	})
	return a
}

func (d *decoder) notify(n *vnode, at Pos) *Notify {
	nt := &Notify{}
	hasURL := false
	if !d.fields(n, "wait.notify", notifyFields, func(p vpair) {
		v := p.val
		switch p.key {
		case "url":
			hasURL = true
			nt.URL = d.urlTemplate(v, "wait.notify.url")
		case "headers":
			nt.Headers = d.scalarMap(v, "wait.notify.headers", true)
		case "body":
			if v.kind != vMap && v.kind != vString {
				d.typeError(v, "wait.notify.body", "a mapping (or an expression yielding one)")
				return
			}
			nt.Body = d.template(v, "wait.notify.body")
		}
	}) {
		return nt
	}
	if !hasURL {
		d.errorf(at, `wait.notify is missing "url"`)
	}
	return nt
}

// urlTemplate decodes a URL template: a literal must be an absolute http
// or https URL.
func (d *decoder) urlTemplate(n *vnode, field string) string {
	s, ok := d.str(n, field)
	if !ok {
		return ""
	}
	d.template(n, field)
	if s == "" {
		d.errorf(n.pos, "%s must not be empty", field)
	} else if !expr.HasExpr(s) {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.errorf(n.pos, "%s %q is not an absolute http or https URL", field, s)
		}
	}
	return s
}

// scalarTemplate decodes a template that must be a string, number or
// boolean (an id, a key).
func (d *decoder) scalarTemplate(n *vnode, field string) any {
	switch n.kind {
	case vString, vInt, vBool:
		return d.template(n, field)
	}
	d.typeError(n, field, "a string (or an expression)")
	return nil
}

// timeTemplate decodes a time: an RFC 3339 timestamp (or, when
// durationOK, a duration like "24h"), or a template yielding one.
func (d *decoder) timeTemplate(n *vnode, field string, durationOK bool) any {
	s, ok := d.str(n, field)
	if !ok {
		return nil
	}
	v := d.template(n, field)
	if expr.HasExpr(s) {
		return v
	}
	if _, err := time.Parse(time.RFC3339, s); err == nil {
		return v
	}
	if durationOK {
		if dur, err := time.ParseDuration(s); err == nil && dur > 0 {
			return v
		}
		d.errorf(n.pos, "%s %q is neither an RFC 3339 timestamp (2026-01-02T15:04:05Z) nor a positive duration (24h)", field, s)
		return nil
	}
	d.errorf(n.pos, "%s %q is not an RFC 3339 timestamp (2026-01-02T15:04:05Z) or a ${{ }} expression yielding one", field, s)
	return nil
}

func (d *decoder) workflowCall(n *vnode, at Pos) *WorkflowCall {
	c := &WorkflowCall{}
	has := false
	if !d.fields(n, "workflow_call", workflowCallFields, func(p vpair) {
		v := p.val
		switch p.key {
		case "workflow":
			has = true
			if s, ok := d.str(v, "workflow_call.workflow"); ok {
				if !ValidID(s) {
					d.errorf(v.pos, "workflow_call.workflow %q must be a workflow name ([a-z0-9][a-z0-9_-]*)", s)
				}
				c.Workflow = s
			}
		case "input":
			if v.kind != vMap && v.kind != vString {
				d.typeError(v, "workflow_call.input", "a mapping (or an expression yielding one)")
				return
			}
			c.Input = d.template(v, "workflow_call.input")
		case "revision":
			if s, ok := d.str(v, "workflow_call.revision"); ok {
				if s != "current" && !isRevision(s) {
					d.errorf(v.pos, "workflow_call.revision %q must be \"current\" or a revision (64 hex digits)", s)
				}
				c.Revision = s
			}
		}
	}) {
		return c
	}
	if !has {
		d.errorf(at, `workflow_call is missing "workflow"`)
	}
	return c
}

func isRevision(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (d *decoder) sessionRead(n *vnode, at Pos) *SessionRead {
	r := &SessionRead{}
	seen := map[string]bool{}
	if !d.fields(n, "session_read", sessionReadFields, func(p vpair) {
		seen[p.key] = true
		switch p.key {
		case "session":
			r.Session = d.scalarTemplate(p.val, "session_read.session")
		case "key":
			r.Key = d.scalarTemplate(p.val, "session_read.key")
		case "default":
			r.Default = d.template(p.val, "session_read.default")
		}
	}) {
		return r
	}
	d.required(at, "session_read", seen, "session", "key")
	return r
}

func (d *decoder) sessionWrite(n *vnode, at Pos) *SessionWrite {
	w := &SessionWrite{}
	seen := map[string]bool{}
	if !d.fields(n, "session_write", sessionWriteFields, func(p vpair) {
		seen[p.key] = true
		switch p.key {
		case "session":
			w.Session = d.scalarTemplate(p.val, "session_write.session")
		case "key":
			w.Key = d.scalarTemplate(p.val, "session_write.key")
		case "value":
			w.Value = d.template(p.val, "session_write.value")
		case "keep_until":
			w.KeepUntil = d.timeTemplate(p.val, "session_write.keep_until", true)
		}
	}) {
		return w
	}
	d.required(at, "session_write", seen, "session", "key", "value")
	return w
}

func (d *decoder) required(at Pos, what string, seen map[string]bool, names ...string) {
	for _, name := range names {
		if !seen[name] {
			d.errorf(at, "%s is missing %q", what, name)
		}
	}
}

// durable decodes one of the kinds of this file (wait, workflow_call,
// session_read, session_write) into s.
func (d *decoder) durable(s *Step, k kindKey) {
	switch k.name {
	case "wait":
		s.Wait = d.wait(k.val, k.pos)
	case "workflow_call":
		s.WorkflowCall = d.workflowCall(k.val, k.pos)
	case "session_read":
		s.SessionRead = d.sessionRead(k.val, k.pos)
	case "session_write":
		s.SessionWrite = d.sessionWrite(k.val, k.pos)
	}
}
