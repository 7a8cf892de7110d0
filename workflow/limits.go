package workflow

import "fmt"

// Limits caps what a definition, a run input and a wake payload may ask of
// Starflow (SPEC §2: "Sizes and counts are capped … configurable, with a
// clear error naming the cap"). Every field's zero value takes its
// default (the XxxDefault constant); a negative value means no limit.
//
// Static caps (SourceBytes, NestingDepth, ForEachConcurrency,
// MaxIterations) are checked by Parse, so `starflow validate`, apply and
// `starflow run` refuse a definition over them with the position of the
// offending value. A stored definition is executed as it was applied: the
// runner does not check static caps again (a worker configured lower than
// the apply does not fail runs halfway). Dynamic caps are checked where
// the value appears: InputBytes at enqueue (and for a workflow_call
// child's input), PayloadBytes when a wake or signal arrives (before a
// wake token is spent), ForEachItems when a for_each's items have been
// evaluated (before any item starts; the step fails, not retryable),
// ChildDepth when a workflow_call is about to start its child (the step
// fails, not retryable).
//
// ForEachInFlight is not a cap on what a definition may say but a bound
// on a runner's memory: a for_each runs at most that many items at once,
// whatever its concurrency (a concurrency is a maximum, not a promise).
type Limits struct {
	// SourceBytes caps the size of a definition's source text, in bytes.
	// Default SourceBytesDefault (1 MiB). Key limits.definition_bytes.
	SourceBytes int64
	// InputBytes caps the size of a run's input as JSON, in bytes.
	// Default InputBytesDefault (1 MiB). Key limits.input_bytes.
	InputBytes int64
	// PayloadBytes caps the size of a wake or signal payload as JSON, in
	// bytes. Default PayloadBytesDefault (1 MiB). Key limits.payload_bytes.
	PayloadBytes int64
	// ForEachItems caps how many items one for_each may iterate over
	// (counted when its items expression has been evaluated). Default
	// ForEachItemsDefault (10,000). Key limits.for_each_items.
	ForEachItems int
	// ForEachConcurrency caps a for_each's concurrency. Default
	// ForEachConcurrencyDefault (64). Key limits.for_each_concurrency.
	ForEachConcurrency int
	// MaxIterations caps a repeat_until's max_iterations. Default
	// MaxIterationsDefault (10,000). Key limits.max_iterations.
	MaxIterations int
	// NestingDepth caps how many control-flow constructs (if, try,
	// repeat_until, for_each, parallel) may enclose a step. Default
	// NestingDepthDefault (32). Key limits.nesting_depth.
	NestingDepth int
	// ForEachInFlight bounds how many items of one for_each a runner runs
	// at once, whatever the loop's concurrency: the goroutines and item
	// frames alive at a time. Default ForEachInFlightDefault (1,024). Key
	// limits.for_each_in_flight.
	ForEachInFlight int
	// ChildDepth caps how deep child runs nest: a run's depth is how many
	// workflow_call links separate it from the root of its tree (the
	// root is at 0; starflowtype.Run.Depth, stored with the run), and a
	// workflow_call whose child would be deeper than ChildDepth fails its
	// step (permanently; a try can catch it) instead of starting it. So
	// a tree holds at most ChildDepth levels of children below its root,
	// and a workflow that calls itself stops there. Default
	// ChildDepthDefault (32). Key limits.child_depth.
	ChildDepth int
}

// Defaults of Limits.
const (
	SourceBytesDefault        int64 = 1 << 20 // 1 MiB
	InputBytesDefault         int64 = 1 << 20 // 1 MiB
	PayloadBytesDefault       int64 = 1 << 20 // 1 MiB
	ForEachItemsDefault             = 10_000
	ForEachConcurrencyDefault       = 64
	MaxIterationsDefault            = 10_000
	NestingDepthDefault             = 32
	ForEachInFlightDefault          = 1_024
	ChildDepthDefault               = 32
)

// MaxConstructDepth is the default nesting depth of control-flow
// constructs (Limits.NestingDepth).
const MaxConstructDepth = NestingDepthDefault

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64(&l.SourceBytes, SourceBytesDefault)
	def64(&l.InputBytes, InputBytesDefault)
	def64(&l.PayloadBytes, PayloadBytesDefault)
	def(&l.ForEachItems, ForEachItemsDefault)
	def(&l.ForEachConcurrency, ForEachConcurrencyDefault)
	def(&l.MaxIterations, MaxIterationsDefault)
	def(&l.NestingDepth, NestingDepthDefault)
	def(&l.ForEachInFlight, ForEachInFlightDefault)
	def(&l.ChildDepth, ChildDepthDefault)
	return l
}

// NoLimits has every cap lifted (and ForEachInFlight at its default: it
// bounds memory, not what definitions say). The engine parses stored
// definitions with it.
func NoLimits() Limits {
	return Limits{SourceBytes: -1, InputBytes: -1, PayloadBytes: -1, ForEachItems: -1,
		ForEachConcurrency: -1, MaxIterations: -1, NestingDepth: -1, ForEachInFlight: ForEachInFlightDefault, ChildDepth: -1}
}

// Limit names one cap: its key (as errors and the docs name it), the CLI
// flag and environment variable that set it, and the Config field.
type Limit struct {
	Key, Flag, Env, Field string
}

// The caps, for errors, flags and docs.
var (
	LimitSourceBytes        = Limit{"limits.definition_bytes", "--max-definition-bytes", "STARFLOW_MAX_DEFINITION_BYTES", "SourceBytes"}
	LimitInputBytes         = Limit{"limits.input_bytes", "--max-input-bytes", "STARFLOW_MAX_INPUT_BYTES", "InputBytes"}
	LimitPayloadBytes       = Limit{"limits.payload_bytes", "--max-payload-bytes", "STARFLOW_MAX_PAYLOAD_BYTES", "PayloadBytes"}
	LimitForEachItems       = Limit{"limits.for_each_items", "--max-for-each-items", "STARFLOW_MAX_FOR_EACH_ITEMS", "ForEachItems"}
	LimitForEachConcurrency = Limit{"limits.for_each_concurrency", "--max-for-each-concurrency", "STARFLOW_MAX_FOR_EACH_CONCURRENCY", "ForEachConcurrency"}
	LimitMaxIterations      = Limit{"limits.max_iterations", "--max-iterations", "STARFLOW_MAX_ITERATIONS", "MaxIterations"}
	LimitNestingDepth       = Limit{"limits.nesting_depth", "--max-nesting-depth", "STARFLOW_MAX_NESTING_DEPTH", "NestingDepth"}
	LimitForEachInFlight    = Limit{"limits.for_each_in_flight", "--for-each-in-flight", "STARFLOW_FOR_EACH_IN_FLIGHT", "ForEachInFlight"}
	LimitChildDepth         = Limit{"limits.child_depth", "--max-child-depth", "STARFLOW_MAX_CHILD_DEPTH", "ChildDepth"}
)

// Hint says how to raise the cap: "(limits.x; raise it with --max-x,
// STARFLOW_MAX_X or starflow.Config.Limits.X)".
func (l Limit) Hint() string {
	return fmt.Sprintf("(%s; raise it with %s, %s or starflow.Config.Limits.%s)", l.Key, l.Flag, l.Env, l.Field)
}

// LimitError is a value over a cap. Its message names what exceeded the
// cap, the cap, and how to raise it, e.g. "for_each ship: 1000000 items
// exceed the limit of 10000 (limits.for_each_items; raise it with
// --max-for-each-items, STARFLOW_MAX_FOR_EACH_ITEMS or
// starflow.Config.Limits.ForEachItems)".
type LimitError struct {
	Limit Limit
	Value int64 // the value over the cap (bytes, items, iterations, depth)
	Max   int64 // the cap
	// Subject says what Value measures, with the verb: "for_each ship:
	// 1000000 items exceed", "the run input (2097152 bytes) exceeds".
	Subject string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s the limit of %d %s", e.Subject, e.Max, e.Limit.Hint())
}

// over reports whether n is over the cap max (a negative cap is no cap).
func over(n, max int64) bool { return max >= 0 && n > max }

func limitError(l Limit, n, max int64, format string, args ...any) *LimitError {
	return &LimitError{Limit: l, Value: n, Max: max, Subject: fmt.Sprintf(format, args...)}
}

// CheckInput refuses a run input of n bytes (as JSON) over InputBytes.
func (l Limits) CheckInput(n int) error {
	l = l.WithDefaults()
	if over(int64(n), l.InputBytes) {
		return limitError(LimitInputBytes, int64(n), l.InputBytes, "the run input (%d bytes as JSON) exceeds", n)
	}
	return nil
}

// CheckPayload refuses a wake or signal payload of n bytes (as JSON) over
// PayloadBytes.
func (l Limits) CheckPayload(n int) error {
	l = l.WithDefaults()
	if over(int64(n), l.PayloadBytes) {
		return limitError(LimitPayloadBytes, int64(n), l.PayloadBytes, "the payload (%d bytes as JSON) exceeds", n)
	}
	return nil
}

// CheckForEachItems refuses n items of the for_each step stepID over
// ForEachItems.
func (l Limits) CheckForEachItems(stepID string, n int) error {
	l = l.WithDefaults()
	if over(int64(n), int64(l.ForEachItems)) {
		return limitError(LimitForEachItems, int64(n), int64(l.ForEachItems), "for_each %s: %d items exceed", stepID, n)
	}
	return nil
}

// CheckChildDepth refuses the child run (of workflow child) that the
// workflow_call step stepID of a run at depth parentDepth would start, at
// parentDepth + 1, when it would nest deeper than ChildDepth.
func (l Limits) CheckChildDepth(stepID, child string, parentDepth int) error {
	l = l.WithDefaults()
	if d := int64(parentDepth) + 1; over(d, int64(l.ChildDepth)) {
		return limitError(LimitChildDepth, d, int64(l.ChildDepth),
			"workflow_call %s: the child run of %s would be at depth %d (this run is %d workflow_call%s below its root run), which exceeds",
			stepID, child, d, parentDepth, plural(parentDepth))
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// CheckSource refuses a definition source of n bytes over SourceBytes.
func (l Limits) CheckSource(n int) error {
	l = l.WithDefaults()
	if over(int64(n), l.SourceBytes) {
		return limitError(LimitSourceBytes, int64(n), l.SourceBytes, "the definition source (%d bytes) exceeds", n)
	}
	return nil
}

// InFlight is how many items of a for_each with the given concurrency and
// number of items a runner runs at once: the least of the three (at least
// 1).
func (l Limits) InFlight(concurrency, items int) int {
	l = l.WithDefaults()
	n := min(concurrency, items)
	if l.ForEachInFlight > 0 {
		n = min(n, l.ForEachInFlight)
	}
	return max(n, 1)
}

// overLimit reports a value over a cap at p; errors.As finds the
// *LimitError.
func (d *decoder) overLimit(p Pos, e *LimitError) {
	d.errs.add(p, e, "%s", e.Error())
}
