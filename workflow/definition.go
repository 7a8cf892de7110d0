package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
// n-th retry after min(InitialInterval × Backoff^(n-1), MaxInterval) with
// ±20% jitter.
type RetryPolicy struct {
	MaxAttempts     int      `json:"max_attempts,omitempty"`     // tries in all; default 3
	InitialInterval Duration `json:"initial_interval,omitempty"` // default 1s
	Backoff         float64  `json:"backoff,omitempty"`          // multiplier; default 2.0
	MaxInterval     Duration `json:"max_interval,omitempty"`     // default 1m
}

// Step is one entry of a steps list. Exactly one kind field is set (or, for
// a custom step type registered from Go, Custom).
type Step struct {
	ID          string       `json:"id"`
	When        any          `json:"when,omitempty"`      // bool or expression
	RunAfter    []string     `json:"run_after,omitempty"` // ids in the same list; none = after the step before
	RetryPolicy *RetryPolicy `json:"retry_policy,omitempty"`
	Timeout     Duration     `json:"timeout,omitempty"`
	Output      any          `json:"output,omitempty"` // template; sees the raw output as `output`

	ServiceCall *ServiceCall   `json:"service_call,omitempty"`
	ContextSet  map[string]any `json:"context_set,omitempty"` // key → template
	Fail        *Fail          `json:"fail,omitempty"`
	Custom      *Custom        `json:"-"` // marshalled as {"<type>": input}

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

// Fail ends the run (or the enclosing try) with Message.
type Fail struct {
	Message string `json:"message"` // template
}

// Custom is a step of a type registered from Go (RegisterStep). Input is
// the value written under the type's key, as a template.
type Custom struct {
	Type  string
	Input any
}

// Kind names the step's kind: "service_call", "context_set", "fail", or the
// custom type's name.
func (s *Step) Kind() string {
	switch {
	case s.ServiceCall != nil:
		return "service_call"
	case s.ContextSet != nil:
		return "context_set"
	case s.Fail != nil:
		return "fail"
	case s.Custom != nil:
		return s.Custom.Type
	}
	return ""
}

// MarshalJSON writes the step with its custom type, if any, as a key of
// its own. Template values keep their JSON type (see Definition.MarshalJSON).
func (s *Step) MarshalJSON() ([]byte, error) {
	type plain Step
	c := plain(*s)
	c.When = canonValue(c.When)
	c.Output = canonValue(c.Output)
	c.ContextSet = canonMap(c.ContextSet)
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

// StepByID finds a step anywhere in the definition.
func (d *Definition) StepByID(id string) *Step {
	for _, s := range d.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}
