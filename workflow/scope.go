package workflow

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/starflow/starflow/internal/expr"
)

// Names in scope (SPEC §2). Every expression is checked, once the whole
// definition is decoded, for the names it reads that the engine could
// never give it a value at that point:
//
//   - steps.<id> must name a step that has run when the expression is
//     evaluated: in the same steps list and before it (a step it depends
//     on, directly or through others, when the list is a run_after graph),
//     or so in an enclosing list (for a step nested in a construct, before
//     the construct). A try's catch also sees the steps of its steps list,
//     and finally those of steps and catch; a repeat_until's until sees its
//     iteration's steps; the definition's output sees the top-level steps.
//     Steps nested in a construct are not addressable from outside it, nor
//     from another branch (then/else, lanes) of it; a step's own entry,
//     and the entry of a construct it is nested in, never hold an output
//     while it runs. The engine gives every one of these a placeholder
//     entry {status: pending} at most, so has(steps.x.output) is always
//     false there and steps.x.output always fails: a definition reading
//     one is refused.
//   - item (or the `as` name of a for_each) only inside a for_each's
//     steps; error only inside a try's catch; output only in a step's own
//     output expression.
//
// Names a comprehension binds (list.map(item, …)) shadow these, and a
// computed index (steps[name]) is not checked.

// loopBind is the `as` name a for_each binds for its steps.
type loopBind struct {
	name, stepID string
}

// exprSite is one string holding expressions, and what is in scope where
// it is evaluated.
type exprSite struct {
	n      *vnode
	field  string
	bare   bool     // an expression without ${{ }} (when, condition, until, items)
	step   *stepSrc // the step whose field it is; nil for the definition's output
	loops  []loopBind
	catch  bool // inside a try's catch list, or an expression over error (catch_when, retry_on)
	output bool // a step's own output expression
}

// site records the string n (its expressions compiled) for checkRefs.
func (d *decoder) site(n *vnode, field string, bare bool) {
	d.sites = append(d.sites, &exprSite{n: n, field: field, bare: bare, step: d.cur,
		loops: slices.Clone(d.loops), catch: d.inCatch > 0 || d.inError > 0, output: d.inOutput})
}

// noRetries reports whether the step kind has no tries of its own, so a
// retry_policy on it would do nothing: the constructs (the steps inside
// have their own), wait and workflow_call (a durable wait is entered once;
// it has a timeout of its own).
func noRetries(s *Step) bool {
	return s.IsConstruct() || s.Wait != nil || s.WorkflowCall != nil || s.Pass != nil
}

func whyNoRetries(s *Step) string {
	if s.Pass != nil {
		return "a pass step only produces its value, which cannot fail in a way a retry would change"
	}
	if s.IsConstruct() {
		return "a construct is not retried as a whole (the steps inside it are tried and retried one by one)"
	}
	return "a durable wait is entered once and ends when woken or at its timeout"
}

// checkRefs checks the names every expression reads (see the comment at
// the top of this file).
func (d *decoder) checkRefs() {
	byID := map[string]*stepSrc{}
	var ids []string
	for _, src := range d.steps {
		if id := src.step.ID; id != "" {
			if _, dup := byID[id]; !dup {
				byID[id] = src
				ids = append(ids, id)
			}
		}
	}
	children := map[*stepSrc][]*listSrc{}
	for _, l := range d.lists {
		if l.parent != nil {
			children[l.parent] = append(children[l.parent], l)
		}
	}
	for _, st := range d.sites {
		spans := []expr.Span{{Src: st.n.s}}
		if !st.bare {
			spans = expr.Spans(st.n.s)
		}
		for _, sp := range spans {
			refs, err := d.opts.Expr.Refs(sp.Src)
			if err != nil {
				continue // compiled already: cannot happen
			}
			for _, r := range refs {
				msg := d.refProblem(st, r, byID, ids, children)
				if msg == "" {
					continue
				}
				rs := []rune(sp.Src)
				off := sp.Offset + len(string(rs[:min(r.Offset, len(rs))]))
				d.errorf(d.posIn(st.n, off), "%s: %s", st.field, msg)
			}
		}
	}
}

// refProblem says what is wrong with reference r at site st ("" when
// nothing is).
func (d *decoder) refProblem(st *exprSite, r expr.Ref, byID map[string]*stepSrc, ids []string, children map[*stepSrc][]*listSrc) string {
	switch r.Var {
	case "steps":
		if len(r.Path) == 0 {
			return ""
		}
		return d.stepRef(st, r.Path[0], byID, ids, children)
	case "error":
		if !st.catch {
			return "error is defined only in the steps of a try's catch list, its catch_when, and retry_on (the failure being handled)"
		}
	case "output":
		if !st.output {
			return "output is defined only in a step's own output expression (the step's raw output)"
		}
	case DefaultItemName:
		// Another `as` name is declared only inside its loop (compile
		// refuses it elsewhere); item is declared everywhere.
		for _, b := range st.loops {
			if b.name == r.Var {
				return ""
			}
		}
		if len(st.loops) == 0 {
			return fmt.Sprintf("%s is defined only in the steps of a for_each (the current element)", r.Var)
		}
		in := st.loops[len(st.loops)-1]
		return fmt.Sprintf("%s is not defined here: the enclosing for_each %q names its element %q (as: %s)", r.Var, in.stepID, in.name, in.name)
	}
	return ""
}

// stepRef checks steps.<id> at site st. children lists the steps lists of
// each construct.
func (d *decoder) stepRef(st *exprSite, id string, byID map[string]*stepSrc, ids []string, children map[*stepSrc][]*listSrc) string {
	t := byID[id]
	if t == nil {
		return fmt.Sprintf("steps.%s: no step %q in the definition%s", id, id, suggest(id, ids))
	}
	if st.step == nil { // the definition's output: the top-level steps
		if t.list.parent == nil {
			return ""
		}
		top := t
		for top.list.parent != nil {
			top = top.list.parent
		}
		return fmt.Sprintf("steps.%s: step %q is nested in step %q and not addressable outside it; use steps.%s.output", id, id, top.step.ID, top.step.ID)
	}
	// The lists the site sees: the chain of lists it is in, innermost
	// first, each with the step of that list it is in (its anchor), and
	// the lists it sees without being in them (a try's steps from its
	// catch, an iteration's steps from until), with no anchor.
	onChain := map[*listSrc]*stepSrc{}
	isUntil := st.field == "repeat_until.until"
	if isUntil {
		for _, l := range children[st.step] {
			if l.field == "repeat_until.steps" {
				if t.list == l {
					return ""
				}
				onChain[l] = nil
			}
		}
	}
	for a := st.step; a != nil; a = a.list.parent {
		if t == a {
			if a == st.step {
				return fmt.Sprintf("steps.%s: a step cannot read its own entry (it has no output while it runs%s)", id, ownOutputHint(st))
			}
			return fmt.Sprintf("steps.%s: this step is nested in step %q, which has no output until it ends", id, id)
		}
		onChain[a.list] = a
		if t.list == a.list {
			if a.list.precedes(t.index, a.index) {
				return ""
			}
			return orderProblem(t, a, st.step)
		}
		if l := a.list; l.parent != nil {
			for _, sib := range children[l.parent] {
				if trySees(l.field, sib.field) {
					if t.list == sib {
						return ""
					}
					onChain[sib] = nil
				}
			}
		}
	}
	// t is nested in a construct: the innermost enclosing construct of t
	// that is in a list the site sees.
	for c := t.list.parent; c != nil; c = c.list.parent {
		a, seen := onChain[c.list]
		if !seen {
			continue
		}
		if a == c { // c encloses the site too: another branch of it
			return fmt.Sprintf("steps.%s: step %q is in %s, another branch of step %q than this step; it is not addressable here", id, id, t.listOf(c).desc, c.step.ID)
		}
		return fmt.Sprintf("steps.%s: step %q is nested in step %q and not addressable outside it; use steps.%s.output", id, id, c.step.ID, c.step.ID)
	}
	return fmt.Sprintf("steps.%s: step %q is not addressable here", id, id) // unreachable: the top-level list is on every chain
}

// listOf returns the list of construct c that holds s (s is nested in c).
func (s *stepSrc) listOf(c *stepSrc) *listSrc {
	l := s.list
	for l.parent != c {
		l = l.parent.list
	}
	return l
}

// trySees reports whether a step in the list field of a try sees the
// steps of its list other: catch sees steps, finally sees steps and catch.
func trySees(field, other string) bool {
	switch field {
	case "try.catch":
		return other == "try.steps"
	case "try.finally":
		return other == "try.steps" || other == "try.catch"
	}
	return false
}

func ownOutputHint(st *exprSite) string {
	if st.output {
		return "; its output expression sees the raw output as output"
	}
	return ""
}

// orderProblem explains why step t (in the same list as a, the site's
// step or the construct enclosing it) has not run when a runs.
func orderProblem(t, a, site *stepSrc) string {
	who := fmt.Sprintf("step %q", a.step.ID)
	if a != site {
		who = fmt.Sprintf("step %q (which step %q is nested in)", a.step.ID, site.step.ID)
	}
	if a.list.isGraph() {
		return fmt.Sprintf("steps.%s: step %q has not run when %s starts: it does not run after %q (add %q to its run_after, directly or through a step it runs after)",
			t.step.ID, t.step.ID, who, t.step.ID, t.step.ID)
	}
	return fmt.Sprintf("steps.%s: step %q comes after %s in %s and has not run yet when it runs", t.step.ID, t.step.ID, who, a.list.desc)
}

// isGraph reports whether a step of the list has run_after: the list is
// then a graph, else a sequence.
func (l *listSrc) isGraph() bool {
	return slices.ContainsFunc(l.steps, func(s *stepSrc) bool { return s.hasAfter })
}

// precedes reports whether step j of the list has run when step i starts:
// j is before i in a sequence; i depends on j, directly or not, in a
// graph.
func (l *listSrc) precedes(j, i int) bool {
	if !l.isGraph() {
		return j < i
	}
	if l.reach == nil {
		l.reach = map[int][]bool{}
	}
	r, ok := l.reach[i]
	if !ok {
		index := map[string]int{}
		for k, s := range l.steps {
			if _, dup := index[s.step.ID]; !dup {
				index[s.step.ID] = k
			}
		}
		r = make([]bool, len(l.steps))
		stack := []int{i}
		for len(stack) > 0 {
			k := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, dep := range l.deps(k, index) {
				if !r[dep] {
					r[dep] = true
					stack = append(stack, dep)
				}
			}
		}
		l.reach[i] = r
	}
	return r[j]
}

// deps returns the indexes step k of the list waits for (DependsOn).
func (l *listSrc) deps(k int, index map[string]int) []int {
	s := l.steps[k]
	if !s.hasAfter {
		if k > 0 {
			return []int{k - 1}
		}
		return nil
	}
	var out []int
	for _, id := range s.step.RunAfter {
		if j, ok := index[id]; ok {
			out = append(out, j)
		}
	}
	return out
}

// posIn returns the position of byte off of the string n, when the
// string is written on one line and the text before off has no escapes;
// n's own position otherwise.
func (d *decoder) posIn(n *vnode, off int) Pos {
	q := -1
	switch n.style {
	case 0:
		q = 0
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		q = 1
	}
	if q < 0 || off < 0 || off > len(n.s) || strings.Contains(n.s[:off], "\n") {
		return n.pos
	}
	want := []rune(n.s[:off])
	line := d.src.line(n.pos.Line)
	start := n.pos.Column - 1 + q
	if start < 0 || start+len(want) > len(line) || !slices.Equal(line[start:start+len(want)], want) {
		return n.pos
	}
	return Pos{Line: n.pos.Line, Column: n.pos.Column + q + utf8.RuneCountInString(n.s[:off])}
}
