package workflow

// Helpers for the tree of steps that control-flow constructs make: a
// construct (if, try, repeat_until, for_each, parallel, switch) holds nested steps
// lists, each of which is a graph of its own (run_after names steps of the
// same list only), while step ids are unique in the whole definition.

// Children returns the steps lists nested in s, in a fixed order: then,
// else (if); steps, catch, finally (try); steps (repeat_until, for_each);
// each lane in lane-name order (parallel); each case's steps, then default
// (switch). Absent optional lists (else,
// catch, finally) are left out, so the result is empty for a step that is
// not a construct. Use the construct's own fields to tell the lists apart.
func (s *Step) Children() [][]*Step {
	var out [][]*Step
	add := func(l []*Step) {
		if l != nil {
			out = append(out, l)
		}
	}
	switch {
	case s.If != nil:
		add(s.If.Then)
		add(s.If.Else)
	case s.Try != nil:
		add(s.Try.Steps)
		add(s.Try.Catch)
		add(s.Try.Finally)
	case s.RepeatUntil != nil:
		add(s.RepeatUntil.Steps)
	case s.ForEach != nil:
		add(s.ForEach.Steps)
	case s.Parallel != nil:
		for _, name := range s.Parallel.LaneNames() {
			add(s.Parallel.Lanes[name])
		}
	case s.Switch != nil:
		for _, c := range s.Switch.Cases {
			add(c.Steps)
		}
		add(s.Switch.Default)
	}
	return out
}

// IsConstruct reports whether s is a control-flow construct (a step with
// nested steps lists).
func (s *Step) IsConstruct() bool {
	return s.If != nil || s.Try != nil || s.RepeatUntil != nil || s.ForEach != nil || s.Parallel != nil || s.Switch != nil
}

// Walk visits every step of the definition depth first, in source order: a
// step, then the lists nested in it (in the order of Children), then the
// step after it. list is the steps list s belongs to (d.Steps at the top
// level). When fn returns false, Walk does not descend into s.
func (d *Definition) Walk(fn func(s *Step, list []*Step) bool) {
	walkList(d.Steps, fn)
}

func walkList(list []*Step, fn func(s *Step, list []*Step) bool) {
	for _, s := range list {
		if s == nil || !fn(s, list) {
			continue
		}
		for _, child := range s.Children() {
			walkList(child, fn)
		}
	}
}

// StepByID finds a step anywhere in the definition, nested lists
// included; nil when there is none.
func (d *Definition) StepByID(id string) *Step {
	var found *Step
	d.Walk(func(s *Step, _ []*Step) bool {
		if found == nil && s.ID == id {
			found = s
		}
		return found == nil
	})
	return found
}

// Ancestors returns the constructs enclosing the step with the given id,
// outermost first: empty for a top-level step, nil when there is no such
// step.
func (d *Definition) Ancestors(id string) []*Step {
	var path []*Step
	var find func(list []*Step) bool
	find = func(list []*Step) bool {
		for _, s := range list {
			if s == nil {
				continue
			}
			if s.ID == id {
				return true
			}
			path = append(path, s)
			for _, child := range s.Children() {
				if find(child) {
					return true
				}
			}
			path = path[:len(path)-1]
		}
		return false
	}
	if !find(d.Steps) {
		return nil
	}
	if path == nil {
		path = []*Step{}
	}
	return path
}

// DependsOn returns the ids of the steps that step i of list waits for:
// its run_after list when it has one (possibly empty: no dependency), else
// the step before it (none for the first step).
func DependsOn(list []*Step, i int) []string {
	s := list[i]
	switch {
	case s.RunAfter != nil:
		return s.RunAfter
	case i > 0:
		return []string{list[i-1].ID}
	}
	return nil
}
