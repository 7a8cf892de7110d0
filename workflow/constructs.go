package workflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/starflow/starflow/internal/expr"
)

// Fields of the control-flow constructs, in the order messages list them.
var (
	ifFields          = []string{"condition", "then", "else"}
	tryFields         = []string{"steps", "catch", "finally", "catch_when"}
	repeatUntilFields = []string{"steps", "until", "max_iterations"}
	forEachFields     = []string{"items", "as", "index_as", "concurrency", "steps"}
	parallelFields    = []string{"lanes", "fail_fast", "mode"}
	switchFields      = []string{"cases", "default"}
	caseFields        = []string{"when", "steps"}
	parallelModes     = []string{ModeAll, ModeRace}
)

// reservedNames are the names expressions see that a for_each `as` may not
// take (SPEC §2, "Names in scope"). "item" is allowed: it is the default.
var reservedNames = []string{"input", "variables", "steps", "error", "env", "secrets", "run", "output"}

// celReserved are names a variable of the expression language cannot
// take, or should not, to stay unambiguous: CEL's literals and reserved
// words, its type names, and the namespaces of the functions the
// expression environment provides (optional.of, math.greatest, …).
var celReserved = []string{
	"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
	"if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
	"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "dyn",
	"optional", "math", "strings", "base64", "lists", "sets", "google",
}

// validItemName reports whether s can be a for_each `as` name: it matches
// [a-z_][a-z0-9_]* and is neither a reserved name nor a CEL reserved word.
func validItemName(s string) bool {
	if s == "" || slices.Contains(reservedNames, s) || slices.Contains(celReserved, s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// construct decodes the control-flow construct k of step s.
func (d *decoder) construct(s *Step, k kindKey) {
	if max := d.limits.NestingDepth; max >= 0 && d.depth >= max {
		d.overLimit(k.pos, limitError(LimitNestingDepth, int64(d.depth+1), int64(max),
			"control flow nests more than %d constructs deep: step %q is construct %d of its nest, which exceeds", max, s.ID, d.depth+1))
		// Set the kind, so the step is not reported as kindless.
		switch k.name {
		case "if":
			s.If = &If{}
		case "try":
			s.Try = &Try{}
		case "repeat_until":
			s.RepeatUntil = &RepeatUntil{}
		case "for_each":
			s.ForEach = &ForEach{}
		case "parallel":
			s.Parallel = &Parallel{}
		case "switch":
			s.Switch = &Switch{}
		}
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	switch k.name {
	case "if":
		s.If = d.ifConstruct(s, k)
	case "try":
		s.Try = d.tryConstruct(s, k)
	case "repeat_until":
		s.RepeatUntil = d.repeatUntil(s, k)
	case "for_each":
		s.ForEach = d.forEach(s, k)
	case "parallel":
		s.Parallel = d.parallel(s, k)
	case "switch":
		s.Switch = d.switchConstruct(s, k)
	}
}

// nested describes a steps list of step s for messages.
func nested(list string, s *Step) string {
	return fmt.Sprintf("the %s list of step %q", list, s.ID)
}

// constructFields decodes the mapping of construct k, calling f for each
// allowed field, and reports the required fields it lacks.
func (d *decoder) constructFields(k kindKey, allowed, required []string, f func(p vpair)) {
	seen := map[string]bool{}
	if !d.fields(k.val, k.name, allowed, func(p vpair) {
		seen[p.key] = true
		f(p)
	}) {
		return
	}
	for _, r := range required {
		if !seen[r] {
			d.errorf(k.pos, "%s is missing %q", k.name, r)
		}
	}
}

func (d *decoder) ifConstruct(s *Step, k kindKey) *If {
	c := &If{}
	d.constructFields(k, ifFields, []string{"condition", "then"}, func(p vpair) {
		switch p.key {
		case "condition":
			c.Condition = d.expression(p.val, "if.condition", true)
		case "then":
			c.Then = d.stepList(p.val, "if.then", nested("then", s))
		case "else":
			c.Else = d.stepList(p.val, "if.else", nested("else", s))
		}
	})
	return c
}

func (d *decoder) tryConstruct(s *Step, k kindKey) *Try {
	c := &Try{}
	var whenPos Pos
	d.constructFields(k, tryFields, []string{"steps"}, func(p vpair) {
		switch p.key {
		case "steps":
			c.Steps = d.stepList(p.val, "try.steps", nested("try", s))
		case "catch":
			d.inCatch++
			c.Catch = d.stepList(p.val, "try.catch", nested("catch", s))
			d.inCatch--
		case "finally":
			c.Finally = d.stepList(p.val, "try.finally", nested("finally", s))
		case "catch_when":
			whenPos = p.keyPos
			c.CatchWhen = d.errorExpr(p.val, "try.catch_when")
		}
	})
	if c.CatchWhen != nil && c.Catch == nil && whenPos.Line > 0 {
		d.errorf(whenPos, "try.catch_when has no effect without a catch list: it decides whether catch runs")
	}
	return c
}

func (d *decoder) repeatUntil(s *Step, k kindKey) *RepeatUntil {
	c := &RepeatUntil{}
	// until and the steps see the iteration number as `iteration`.
	d.loopVars = append(d.loopVars, IterationName)
	defer func() { d.loopVars = d.loopVars[:len(d.loopVars)-1] }()
	d.constructFields(k, repeatUntilFields, []string{"steps", "until", "max_iterations"}, func(p vpair) {
		switch p.key {
		case "steps":
			c.Steps = d.stepList(p.val, "repeat_until.steps", nested("repeat_until", s))
		case "until":
			c.Until = d.expression(p.val, "repeat_until.until", true)
		case "max_iterations":
			c.MaxIterations, _ = d.integer(p.val, "repeat_until.max_iterations", 1)
			if max := d.limits.MaxIterations; over(int64(c.MaxIterations), int64(max)) {
				d.overLimit(p.val.pos, limitError(LimitMaxIterations, int64(c.MaxIterations), int64(max),
					"repeat_until %s: max_iterations %d exceeds", s.ID, c.MaxIterations))
			}
		}
	})
	return c
}

// forEach decodes a for_each. Its steps are decoded last, once `as` is
// known: expressions in them may use that name.
func (d *decoder) forEach(s *Step, k kindKey) *ForEach {
	c := &ForEach{As: DefaultItemName, Concurrency: DefaultConcurrency}
	var steps *vnode
	var indexPos Pos
	d.constructFields(k, forEachFields, []string{"items", "steps"}, func(p vpair) {
		switch p.key {
		case "items":
			c.Items = d.expression(p.val, "for_each.items", false)
		case "as":
			if name, ok := d.loopName(p.val, "for_each.as"); ok {
				c.As = name
			}
		case "index_as":
			if name, ok := d.loopName(p.val, "for_each.index_as"); ok {
				c.IndexAs, indexPos = name, p.val.pos
			}
		case "concurrency":
			if n, ok := d.integer(p.val, "for_each.concurrency", 1); ok {
				c.Concurrency = n
				if max := d.limits.ForEachConcurrency; over(int64(n), int64(max)) {
					d.overLimit(p.val.pos, limitError(LimitForEachConcurrency, int64(n), int64(max),
						"for_each %s: concurrency %d exceeds", s.ID, n))
				}
			}
		case "steps":
			steps = p.val
		}
	})
	if c.IndexAs == DefaultIndexName {
		c.IndexAs = "" // the default: one canonical form
	}
	// An item named "index" (as: index, written before the index existed)
	// hides the implicit index: the definition keeps its meaning, and
	// index_as names the index when it is wanted.
	if c.IndexAs != "" && c.IndexAs == c.As {
		d.errorf(indexPos, "for_each.index_as %q is the name of the item (as) too; give them different names", c.IndexAs)
	}
	if steps == nil {
		return c
	}
	// Expressions know "item" (the default); another name, and the index,
	// are loop variables they do not declare (see compile).
	var bound []string
	for _, name := range []string{c.As, c.IndexName()} {
		if validItemName(name) && !slices.Contains(expr.Names, name) {
			bound = append(bound, name)
		}
	}
	d.loopVars = append(d.loopVars, bound...)
	d.loops = append(d.loops, loopBind{name: c.As, stepID: s.ID})
	c.Steps = d.stepList(steps, "for_each.steps", nested("for_each", s))
	d.loops = d.loops[:len(d.loops)-1]
	d.loopVars = d.loopVars[:len(d.loopVars)-len(bound)]
	return c
}

// loopName decodes a name a loop binds (for_each as, index_as): it
// matches [a-z_][a-z0-9_]* and is not a reserved name.
func (d *decoder) loopName(n *vnode, field string) (string, bool) {
	name, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	switch {
	case slices.Contains(reservedNames, name):
		d.errorf(n.pos, "%s %q is a reserved name (%s)", field, name, strings.Join(reservedNames, ", "))
	case slices.Contains(celReserved, name):
		d.errorf(n.pos, "%s %q is a reserved word or type name of the expression language", field, name)
	case !validItemName(name):
		d.errorf(n.pos, "%s %q must match [a-z_][a-z0-9_]*", field, name)
	}
	return name, true
}

func (d *decoder) parallel(s *Step, k kindKey) *Parallel {
	c := &Parallel{}
	var failFastPos Pos
	d.constructFields(k, parallelFields, []string{"lanes"}, func(p vpair) {
		switch p.key {
		case "lanes":
			c.Lanes = d.lanes(s, p.val)
		case "fail_fast":
			if p.val.kind != vBool {
				d.typeError(p.val, "parallel.fail_fast", "a boolean")
				return
			}
			ff := p.val.b
			c.FailFast, failFastPos = &ff, p.keyPos
		case "mode":
			if m, ok := d.str(p.val, "parallel.mode"); ok {
				if !slices.Contains(parallelModes, m) {
					d.errorf(p.val.pos, "parallel.mode must be one of %s, not %q", strings.Join(parallelModes, ", "), m)
				}
				c.Mode = m
			}
		}
	})
	if c.Mode == ModeAll {
		c.Mode = "" // the default: one canonical form
	}
	if c.Races() && failFastPos.Line > 0 {
		d.errorf(failFastPos, "parallel.fail_fast has no effect with mode race: the first lane to succeed cancels the others, and the step fails only when every lane failed")
	}
	if c.FailFast == nil {
		ff := DefaultFailFast
		c.FailFast = &ff
	}
	return c
}

// switchConstruct decodes a switch: its cases in order, then default.
func (d *decoder) switchConstruct(s *Step, k kindKey) *Switch {
	c := &Switch{}
	d.constructFields(k, switchFields, []string{"cases"}, func(p vpair) {
		switch p.key {
		case "cases":
			if p.val.kind != vList {
				d.typeError(p.val, "switch.cases", "a list of {when, steps}")
				return
			}
			if len(p.val.items) == 0 {
				d.errorf(p.val.pos, "switch.cases must list at least one case")
				return
			}
			for i, it := range p.val.items {
				c.Cases = append(c.Cases, d.switchCase(s, i, it))
			}
		case "default":
			c.Default = d.stepList(p.val, "switch.default", nested("default", s))
		}
	})
	return c
}

func (d *decoder) switchCase(s *Step, i int, n *vnode) *SwitchCase {
	c := &SwitchCase{}
	what := fmt.Sprintf("switch.cases[%d]", i)
	seen := map[string]bool{}
	if !d.fields(n, what, caseFields, func(p vpair) {
		seen[p.key] = true
		switch p.key {
		case "when":
			c.When = d.boolExpr(p.val, what+".when")
		case "steps":
			c.Steps = d.stepList(p.val, what+".steps", fmt.Sprintf("case %d of step %q", i, s.ID))
		}
	}) {
		return c
	}
	for _, r := range caseFields {
		if !seen[r] {
			d.errorf(n.pos, "%s is missing %q", what, r)
		}
	}
	return c
}

func (d *decoder) lanes(s *Step, n *vnode) map[string][]*Step {
	if n.kind != vMap {
		d.typeError(n, "parallel.lanes", "a mapping of lane names to steps")
		return nil
	}
	if len(n.pairs) == 0 {
		d.errorf(n.pos, "parallel.lanes must name at least one lane")
		return nil
	}
	out := make(map[string][]*Step, len(n.pairs))
	for _, p := range n.pairs {
		if !ValidID(p.key) {
			d.errorf(p.keyPos, "lane name %q must match [a-z0-9][a-z0-9_-]*", p.key)
		}
		out[p.key] = d.stepList(p.val, "parallel.lanes."+p.key, fmt.Sprintf("lane %q of step %q", p.key, s.ID))
	}
	return out
}
