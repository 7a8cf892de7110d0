package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Definition is a parsed workflow definition (SPEC §2). Expression-bearing
// fields hold the template as written (a string, or any JSON-like value
// containing `${{ }}` strings); the engine compiles them.
type Definition struct {
	Name         string         `json:"name"`
	RecoveryMode string         `json:"recovery_mode,omitempty"` // replay (default) | resume | manual
	RunnerPool   string         `json:"runner_pool,omitempty"`
	MaxAttempts  int            `json:"max_attempts,omitempty"` // run-level attempts; 0 = default 3
	InputSchema  map[string]any `json:"input_schema,omitempty"` // JSON Schema of the run input
	Secrets      []string       `json:"secrets,omitempty"`
	Defaults     *Defaults      `json:"defaults,omitempty"`
	Steps        []*Step        `json:"steps"`
	Output       any            `json:"output,omitempty"` // template of the run's output
	// RetryOn decides whether a failed run attempt is retried (a new
	// attempt, up to MaxAttempts): a boolean expression over `error`, the
	// run's typed failure. nil: the transient set (network, timeout, http
	// 5xx and 429, and a custom step's retryable errors).
	RetryOn any `json:"retry_on,omitempty"`
	// Schedules start runs of the workflow on a cron schedule
	// (schedules.go). Left out of the canonical form when empty, so a
	// definition without schedules keeps the revision it always had.
	Schedules []*Schedule `json:"schedules,omitempty"`
	// Retention overrides how long the store keeps the workflow's ended
	// runs (retention.go). Left out of the canonical form when nil.
	Retention *Retention `json:"retention,omitempty"`

	// Source is the file name the definition was parsed from (not part of
	// the canonical form).
	Source string `json:"-"`

	// inputSchema is InputSchema compiled by Parse (nil: compile on use).
	inputSchema *jsonschema.Schema
}

// Defaults apply to every step that does not set the field itself.
type Defaults struct {
	Timeout     Duration     `json:"timeout,omitempty"`
	RetryPolicy *RetryPolicy `json:"retry_policy,omitempty"`
}

// RetryPolicy is a step's own retry policy: up to MaxAttempts tries, the
// n-th retry after d = min(InitialInterval × Backoff^(n-1), MaxInterval),
// spread by Jitter within the cap: a wait never exceeds MaxInterval.
// A failed try is retried when RetryOn (a boolean expression over
// `error`) is true; nil RetryOn means the transient set (network,
// timeout, http 5xx and 429, a custom step's retryable errors).
type RetryPolicy struct {
	MaxAttempts     int      `json:"max_attempts,omitempty"`     // tries in all; default 3
	InitialInterval Duration `json:"initial_interval,omitempty"` // default 1s
	Backoff         float64  `json:"backoff,omitempty"`          // multiplier; default 2.0
	MaxInterval     Duration `json:"max_interval,omitempty"`     // default 1m
	// Jitter spreads each wait d: "full" draws it from [0, d], "equal"
	// from [d/2, d], "none" waits d; "" (the default) draws it from
	// [0.8 × d, min(1.2 × d, MaxInterval)].
	Jitter  string `json:"jitter,omitempty"`
	RetryOn any    `json:"retry_on,omitempty"` // boolean expression over error; nil = the transient set
}

// Jitter modes of RetryPolicy.Jitter.
const (
	JitterFull  = "full"
	JitterEqual = "equal"
	JitterNone  = "none"
)

// Step is one entry of a steps list. Exactly one kind field is set (or, for
// a custom step type registered from Go, Custom). The control-flow kinds
// (If, Try, RepeatUntil, ForEach, Parallel, Switch) hold nested steps lists; see
// Children and Definition.Walk.
//
// RunAfter names steps of the same list this step waits for. nil (the
// field left out) means "after the step before it in the list" (no
// dependency for the first step); an empty, non-nil list means "no
// dependency: may start at once", so a list can have several roots. The
// canonical form keeps the difference. DependsOn applies the rule.
type Step struct {
	ID          string       `json:"id"`
	When        any          `json:"when,omitempty"`      // bool or expression
	RunAfter    []string     `json:"run_after,omitempty"` // ids in the same list; nil = after the step before, [] = none
	RetryPolicy *RetryPolicy `json:"retry_policy,omitempty"`
	Timeout     Duration     `json:"timeout,omitempty"`
	Output      any          `json:"output,omitempty"` // template; sees the raw output as `output`

	ServiceCall *ServiceCall   `json:"service_call,omitempty"`
	ContextSet  map[string]any `json:"context_set,omitempty"` // key → template
	Fail        *Fail          `json:"fail,omitempty"`
	If          *If            `json:"if,omitempty"`
	Try         *Try           `json:"try,omitempty"`
	RepeatUntil *RepeatUntil   `json:"repeat_until,omitempty"`
	ForEach     *ForEach       `json:"for_each,omitempty"`
	Parallel    *Parallel      `json:"parallel,omitempty"`
	Switch      *Switch        `json:"switch,omitempty"`
	Pass        *Pass          `json:"pass,omitempty"`
	// The durable kinds (waits.go).
	Wait         *Wait         `json:"wait,omitempty"`
	WorkflowCall *WorkflowCall `json:"workflow_call,omitempty"`
	SessionRead  *SessionRead  `json:"session_read,omitempty"`
	SessionWrite *SessionWrite `json:"session_write,omitempty"`
	Job          *Job          `json:"job,omitempty"` // a remote worker's (jobs.go)
	Custom       *Custom       `json:"-"`             // marshalled as {"<type>": input}

	// Pos is where the step starts in the source (not canonical).
	Pos Pos `json:"-"`
}

// ServiceCall is an HTTP request step.
type ServiceCall struct {
	Method       string         `json:"method,omitempty"`        // default GET (POST when Body is set)
	URL          string         `json:"url"`                     // template
	Headers      map[string]any `json:"headers,omitempty"`       // name → template
	Query        map[string]any `json:"query,omitempty"`         // name → template
	Body         any            `json:"body,omitempty"`          // template; sent as JSON
	ExpectStatus []int          `json:"expect_status,omitempty"` // default: any 2xx
}

// Fail ends the run (or the enclosing try) with a typed error: Message,
// Type (default "fail") and Details. Message and Type are string
// templates, Details any template.
type Fail struct {
	Message string `json:"message"`           // template
	Type    string `json:"type,omitempty"`    // template; "" = "fail"
	Details any    `json:"details,omitempty"` // template
}

// MarshalJSON writes the step; template values keep their JSON type.
func (f Fail) MarshalJSON() ([]byte, error) {
	type plain Fail
	c := plain(f)
	c.Details = canonValue(c.Details)
	return json.Marshal(c)
}

// Pass is a step that only produces Value (a template) as its output:
// no side effect, no context change.
type Pass struct {
	Value any // template; may be null
}

// MarshalJSON writes the value itself: `pass: <value>`.
func (p Pass) MarshalJSON() ([]byte, error) { return json.Marshal(canonValue(p.Value)) }

// Switch runs the steps of the first case whose When is true, or Default
// when none is (when there is one). Its output is the output of the
// branch taken, null when none is. Default is nil when absent, never
// empty.
type Switch struct {
	Cases   []*SwitchCase `json:"cases"`             // at least one
	Default []*Step       `json:"default,omitempty"` // nil: no default branch
}

// SwitchCase is one case of a Switch: When is a boolean or an expression
// (like Step.When), Steps are not empty.
type SwitchCase struct {
	When  any     `json:"when"`
	Steps []*Step `json:"steps"`
}

// MarshalJSON writes the case; template values keep their JSON type.
func (c SwitchCase) MarshalJSON() ([]byte, error) {
	type plain SwitchCase
	p := plain(c)
	p.When = canonValue(p.When)
	return json.Marshal(p)
}

// Custom is a step of a type registered from Go (RegisterStep). Input is
// the value written under the type's key, as a template.
type Custom struct {
	Type  string
	Input any
}

// If runs Then when Condition is true, else Else (when there is one). Its
// output is the output of the branch taken, null when none is.
type If struct {
	// Condition is a boolean or an expression (bare CEL, or exactly one
	// `${{ }}`), like Step.When.
	Condition any     `json:"condition"`
	Then      []*Step `json:"then"`           // required, not empty
	Else      []*Step `json:"else,omitempty"` // nil: no else branch; never empty when set
}

// Try runs Steps; when one of them fails and CatchWhen (a boolean
// expression over `error`; nil = always) is true, Catch runs (seeing the
// failure as `error`: {type, message, step_id, scope_path, status, body,
// cause, details}) and the failure is caught. Finally runs in any case,
// after Steps and Catch; a failure CatchWhen declines propagates
// unchanged after it. The output is the output of Steps, or of Catch when
// it caught an error. Catch and Finally are nil when absent, never empty.
type Try struct {
	Steps     []*Step `json:"steps"`
	Catch     []*Step `json:"catch,omitempty"`
	Finally   []*Step `json:"finally,omitempty"`
	CatchWhen any     `json:"catch_when,omitempty"`
}

// MarshalJSON writes the construct; template values keep their JSON type.
func (t Try) MarshalJSON() ([]byte, error) {
	type plain Try
	c := plain(t)
	c.CatchWhen = canonValue(c.CatchWhen)
	return json.Marshal(c)
}

// RepeatUntil runs Steps (iteration i in scope <id>.iter_<i>, from 0), then
// evaluates Until; it stops when Until is true, and fails its step with
// max_iterations_exceeded when MaxIterations iterations ran without Until
// becoming true. The output is the output of the last iteration.
type RepeatUntil struct {
	Steps         []*Step `json:"steps"`
	Until         any     `json:"until"`          // boolean or expression, like Step.When
	MaxIterations int     `json:"max_iterations"` // required, ≥ 1
}

// ForEach runs Steps once per element of the list Items evaluates to
// (item i in scope <id>.item_<i>, from 0), with the element bound to the
// name As and its index (int, from 0) to IndexAs, up to Concurrency items
// at a time. The output is the list of the items' last outputs, in item
// order.
//
// Defaults: As "item", Concurrency 1. Parse fills them in, and the
// canonical form always writes them, so a definition that spells a default
// out has the same revision as one that leaves it out. A ForEach built in
// Go may leave them zero; ItemName and Workers apply the defaults.
type ForEach struct {
	Items       any     `json:"items"`                 // an expression yielding a list
	As          string  `json:"as,omitempty"`          // [a-z_][a-z0-9_]*, not a reserved name
	Concurrency int     `json:"concurrency,omitempty"` // ≥ 1
	Steps       []*Step `json:"steps"`
	// IndexAs names the item's index; "" means "index" (left out of the
	// canonical form, so revisions applied before it existed keep theirs).
	IndexAs string `json:"index_as,omitempty"`
}

// Parallel runs each lane's steps concurrently, lane NAME in scope
// <id>.lane_<NAME>. With FailFast (the default), the first lane failure
// cancels the other lanes; without it every lane runs to its end before
// the step fails. The output maps each lane name to its last output.
//
// FailFast defaults to true: Parse fills it in and the canonical form
// always writes it (see ForEach). FailsFast applies the default to a
// Parallel built in Go with FailFast nil.
//
// With Mode "race" the first lane to succeed wins: the others are
// cancelled, and the output is {lane, output} of the winner; when every
// lane fails, the step fails with the failure of the last lane to fail.
// Mode "" is "all" (left out of the canonical form).
type Parallel struct {
	Lanes    map[string][]*Step `json:"lanes"` // lane name ([a-z0-9][a-z0-9_-]*) → steps; not empty
	FailFast *bool              `json:"fail_fast,omitempty"`
	Mode     string             `json:"mode,omitempty"` // "" (all) | race
}

// Parallel modes.
const (
	ModeAll  = "all"
	ModeRace = "race"
)

// Races reports whether the lanes race (Mode "race").
func (p *Parallel) Races() bool { return p.Mode == ModeRace }

// Defaults of the control-flow constructs (SPEC §2).
const (
	DefaultItemName    = "item"
	DefaultIndexName   = "index"
	IterationName      = "iteration"
	DefaultConcurrency = 1
	DefaultFailFast    = true
)

// ItemName is the name the current element is bound to: As, or "item".
func (f *ForEach) ItemName() string {
	if f.As == "" {
		return DefaultItemName
	}
	return f.As
}

// IndexName is the name the current index is bound to: IndexAs, or
// "index".
func (f *ForEach) IndexName() string {
	if f.IndexAs == "" {
		return DefaultIndexName
	}
	return f.IndexAs
}

// Workers is how many items may run at once: Concurrency, or 1.
func (f *ForEach) Workers() int {
	if f.Concurrency < 1 {
		return DefaultConcurrency
	}
	return f.Concurrency
}

// FailsFast reports whether a lane failure cancels the other lanes:
// FailFast, or true when it is nil.
func (p *Parallel) FailsFast() bool {
	if p.FailFast == nil {
		return DefaultFailFast
	}
	return *p.FailFast
}

// LaneNames returns the lane names in sorted order: the fixed order in
// which lanes are listed, and their context changes merged (SPEC §3).
func (p *Parallel) LaneNames() []string {
	names := make([]string, 0, len(p.Lanes))
	for name := range p.Lanes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// MarshalJSON writes the construct with its defaults filled in.
func (f ForEach) MarshalJSON() ([]byte, error) {
	type plain ForEach
	c := plain(f)
	c.Items = canonValue(c.Items)
	c.As, c.Concurrency = f.ItemName(), f.Workers()
	return json.Marshal(c)
}

// MarshalJSON writes the construct with its default filled in (fail_fast
// left out of a race).
func (p Parallel) MarshalJSON() ([]byte, error) {
	type plain Parallel
	c := plain(p)
	ff := p.FailsFast()
	c.FailFast = &ff
	if p.Races() {
		c.FailFast = nil // no meaning in a race
	}
	return json.Marshal(c)
}

// MarshalJSON writes the construct; template values keep their JSON type.
func (i If) MarshalJSON() ([]byte, error) {
	type plain If
	c := plain(i)
	c.Condition = canonValue(c.Condition)
	return json.Marshal(c)
}

// MarshalJSON writes the construct; template values keep their JSON type.
func (r RepeatUntil) MarshalJSON() ([]byte, error) {
	type plain RepeatUntil
	c := plain(r)
	c.Until = canonValue(c.Until)
	return json.Marshal(c)
}

// Pure reports whether the step has no effect outside the run (it only
// evaluates expressions: context_set, pass), so its start needs no write of its
// own: a crash before its completion is committed loses nothing, and the
// step runs again.
func (s *Step) Pure() bool { return s.ContextSet != nil || s.Pass != nil }

// Kind names the step's kind: service_call, context_set, …, or a custom
// step's type.
func (s *Step) Kind() string {
	switch {
	case s.ServiceCall != nil:
		return "service_call"
	case s.ContextSet != nil:
		return "context_set"
	case s.Fail != nil:
		return "fail"
	case s.If != nil:
		return "if"
	case s.Try != nil:
		return "try"
	case s.RepeatUntil != nil:
		return "repeat_until"
	case s.ForEach != nil:
		return "for_each"
	case s.Parallel != nil:
		return "parallel"
	case s.Switch != nil:
		return "switch"
	case s.Pass != nil:
		return "pass"
	case s.Wait != nil:
		return "wait"
	case s.WorkflowCall != nil:
		return "workflow_call"
	case s.SessionRead != nil:
		return "session_read"
	case s.SessionWrite != nil:
		return "session_write"
	case s.Job != nil:
		return "job"
	case s.Custom != nil:
		return s.Custom.Type
	}
	return ""
}

// stepJSON is Step as the canonical form writes it: the same fields in the
// same order, RunAfter as a pointer so that an explicit empty list is
// written ([]) and an absent one is not.
type stepJSON struct {
	ID          string         `json:"id"`
	When        any            `json:"when,omitempty"`
	RunAfter    *[]string      `json:"run_after,omitempty"`
	RetryPolicy *RetryPolicy   `json:"retry_policy,omitempty"`
	Timeout     Duration       `json:"timeout,omitempty"`
	Output      any            `json:"output,omitempty"`
	ServiceCall *ServiceCall   `json:"service_call,omitempty"`
	ContextSet  map[string]any `json:"context_set,omitempty"`
	Fail        *Fail          `json:"fail,omitempty"`
	If          *If            `json:"if,omitempty"`
	Try         *Try           `json:"try,omitempty"`
	RepeatUntil *RepeatUntil   `json:"repeat_until,omitempty"`
	ForEach     *ForEach       `json:"for_each,omitempty"`
	Parallel    *Parallel      `json:"parallel,omitempty"`
	Switch      *Switch        `json:"switch,omitempty"`
	Pass        *Pass          `json:"pass,omitempty"`

	Wait         *Wait         `json:"wait,omitempty"`
	WorkflowCall *WorkflowCall `json:"workflow_call,omitempty"`
	SessionRead  *SessionRead  `json:"session_read,omitempty"`
	SessionWrite *SessionWrite `json:"session_write,omitempty"`
	Job          *Job          `json:"job,omitempty"`
}

// MarshalJSON writes the step with its custom type, if any, as a key of
// its own. Template values keep their JSON type (see Definition.MarshalJSON).
func (s *Step) MarshalJSON() ([]byte, error) {
	c := stepJSON{
		ID: s.ID, When: canonValue(s.When), RetryPolicy: s.RetryPolicy, Timeout: s.Timeout,
		Output: canonValue(s.Output), ServiceCall: s.ServiceCall, ContextSet: canonMap(s.ContextSet),
		Fail: s.Fail, If: s.If, Try: s.Try, RepeatUntil: s.RepeatUntil, ForEach: s.ForEach, Parallel: s.Parallel,
		Switch: s.Switch, Pass: s.Pass,
		Wait: s.Wait, WorkflowCall: s.WorkflowCall, SessionRead: s.SessionRead, SessionWrite: s.SessionWrite,
		Job: s.Job,
	}
	if s.RunAfter != nil {
		c.RunAfter = &s.RunAfter
	}
	b, err := json.Marshal(&c)
	if err != nil || s.Custom == nil {
		return b, err
	}
	if !ValidID(s.Custom.Type) || reservedStepKey(s.Custom.Type) {
		return nil, fmt.Errorf("step %q: %q cannot be a custom step type", s.ID, s.Custom.Type)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	in, err := json.Marshal(canonValue(s.Custom.Input))
	if err != nil {
		return nil, err
	}
	m[s.Custom.Type] = in
	return json.Marshal(m)
}

// Pos is a position in a source file (1-based line and column).
type Pos struct {
	Line, Column int
}

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m30s") in definitions and in the canonical form.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Canonical returns the definition's canonical JSON form: fields in a fixed
// order, map keys sorted, no insignificant whitespace, source positions
// left out. Two definitions that mean the same thing (YAML or JSON, any
// key order, any comments) have the same canonical form.
func (d *Definition) Canonical() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		// Every field is a JSON-safe type produced by the parser.
		panic(fmt.Sprintf("workflow: canonical form: %v", err))
	}
	return b
}

// Revision returns the sha256 hex of the canonical form.
func (d *Definition) Revision() string {
	sum := sha256.Sum256(d.Canonical())
	return hex.EncodeToString(sum[:])
}
