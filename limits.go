package starflow

import "github.com/starflow/starflow/workflow"

// Limits caps what definitions, run inputs and wake payloads may ask of
// the engine (SPEC §2), and bounds a runner's memory for large for_each
// loops. It is workflow.Limits; see that type for each field, its unit
// and default. Set it as Config.Limits: zero fields take their defaults,
// a negative field lifts that cap.
//
// Where each cap is checked:
//   - Parse and Apply: the definition's source size (SourceBytes), the
//     nesting of constructs (NestingDepth), a for_each's concurrency
//     (ForEachConcurrency) and a repeat_until's max_iterations
//     (MaxIterations), each refused with file:line:column;
//   - Enqueue and EnqueueParams: the run input (InputBytes); a
//     workflow_call step fails when its child's input is over it;
//   - Wake, WakeRun, Signal, SignalKey: the payload (PayloadBytes), before
//     the token is spent or the signal stored;
//   - at run time: a for_each whose items evaluate to more than
//     ForEachItems fails its step (not retried); at most ForEachInFlight
//     items of one for_each run at once; a workflow_call whose child run
//     would nest deeper than ChildDepth below its root run fails its step
//     (not retried) and starts no child.
//
// Errors over a cap are *workflow.LimitError (errors.As), whose message
// names the cap and how to raise it.
type Limits = workflow.Limits

// Defaults of Limits (workflow.Limits).
const (
	SourceBytesDefault        = workflow.SourceBytesDefault        // 1 MiB
	InputBytesDefault         = workflow.InputBytesDefault         // 1 MiB
	PayloadBytesDefault       = workflow.PayloadBytesDefault       // 1 MiB
	ForEachItemsDefault       = workflow.ForEachItemsDefault       // 10,000 items
	ForEachConcurrencyDefault = workflow.ForEachConcurrencyDefault // 64
	MaxIterationsDefault      = workflow.MaxIterationsDefault      // 10,000 iterations
	NestingDepthDefault       = workflow.NestingDepthDefault       // 32 constructs
	ForEachInFlightDefault    = workflow.ForEachInFlightDefault    // 1,024 items
	ChildDepthDefault         = workflow.ChildDepthDefault         // 32 levels of child runs
)

// Limits returns the engine's limits, defaults filled in.
func (e *Engine) Limits() Limits { return e.engine.Limits() }
