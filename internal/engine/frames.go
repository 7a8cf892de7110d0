package engine

import (
	"strings"

	"github.com/starflow/starflow/internal/expr"
	"github.com/starflow/starflow/starflowtype"
)

// Frames (SPEC §3, "Each loop item, lane and DAG branch sees the context as
// of its start plus its own changes; the changes are merged at the join").
//
// A frame is the context one steps list runs in: the names its expressions
// see (input, variables, steps, env, secrets, run, and the loop variable or
// `error` where bound), the scope path of its step instances, and the
// variables it changed (its delta). The root list runs in the root frame
// (scope ”). Every construct runs its nested lists in a body frame of its
// own, in the construct's scope (if, try), or in one frame per iteration,
// item or lane, in the scope `<id>.iter_<i>`, `<id>.item_<i>`,
// `<id>.lane_<NAME>` below it. A child frame starts as a shallow copy of its
// parent's variables and steps maps, so:
//
//   - concurrent items and lanes never share a mutable map (values are
//     never changed in place: a context_set replaces top-level keys);
//   - `steps.<id>` names the instance in the same scope or the nearest
//     enclosing one, and steps nested in a construct are not addressable
//     from outside it (their entries live in the child frame only);
//   - what a construct hands back to the frame it runs in is its output and
//     its delta, exactly what its checkpoint stores: a construct restored
//     from its checkpoint leaves the same context as one that ran.
//
// Deltas are merged at the join in a fixed order — iteration by iteration,
// item index, lane name — with a later set of a key replacing the value, so
// a resumed run ends with exactly the output of an uninterrupted one. A
// frame is used by one goroutine at a time: a construct's goroutines each
// own the child frames they run, and the parent frame is neither read nor
// written while they run except for the copies taken at their start.
type frame struct {
	scope string
	env   *expr.Env      // declares the loop variables bound in vals
	vals  map[string]any // what expressions see
	vars  map[string]any // vals["variables"]
	steps map[string]any // vals["steps"]
	delta map[string]any // variables this frame changed, its children's merged deltas included
	// named lists the names an enclosing for_each bound by its as or
	// index_as: the implicit index and iteration are not bound over them
	// (a definition that named its item "iteration" keeps its meaning).
	named []string
}

// newFrame returns the root frame over vals (which holds "variables" and
// "steps" maps).
func newFrame(env *expr.Env, vals map[string]any) *frame {
	return &frame{env: env, vals: vals, vars: vals["variables"].(map[string]any),
		steps: vals["steps"].(map[string]any), delta: map[string]any{}}
}

// child returns a frame in scope that sees what f sees now; its changes
// stay its own until the parent merges them.
func (f *frame) child(scope string) *frame {
	c := &frame{scope: scope, env: f.env, vals: make(map[string]any, len(f.vals)+1),
		vars: make(map[string]any, len(f.vars)), steps: make(map[string]any, len(f.steps)), delta: map[string]any{},
		named: f.named}
	for k, v := range f.vals {
		c.vals[k] = v
	}
	for k, v := range f.vars {
		c.vars[k] = v
	}
	for k, v := range f.steps {
		c.steps[k] = v
	}
	c.vals["variables"], c.vals["steps"] = c.vars, c.steps
	return c
}

// bind makes name visible to expressions with value v and returns a
// function that restores what name was before.
func (f *frame) bind(name string, v any) (restore func()) {
	old, had := f.vals[name]
	f.vals[name] = v
	return func() {
		if had {
			f.vals[name] = old
		} else {
			delete(f.vals, name)
		}
	}
}

// set applies context changes: later steps of the frame see them, and the
// frame's delta records them.
func (f *frame) set(delta map[string]any) {
	for k, v := range delta {
		f.vars[k] = v
		f.delta[k] = v
	}
}

// merge applies a child frame's changes (the join).
func (f *frame) merge(c *frame) {
	if c != nil {
		f.set(c.delta)
	}
}

// succeeded records a step instance's output as steps.<id>.
func (f *frame) succeeded(stepID string, out any) {
	f.steps[stepID] = map[string]any{"status": string(starflowtype.StepSucceeded), "output": out}
}

// joinScope appends a segment to a scope path: segments are joined with
// '/', and the root scope is ”.
func joinScope(scope, segment string) string {
	if scope == "" {
		return segment
	}
	return scope + "/" + segment
}

// scopeOf is the scope path of one iteration, item or lane of construct
// id: kind is "iter", "item" or "lane".
func scopeOf(parent, id, kind, name string) string {
	var b strings.Builder
	b.WriteString(id)
	b.WriteString(".")
	b.WriteString(kind)
	b.WriteString("_")
	b.WriteString(name)
	return joinScope(parent, b.String())
}
