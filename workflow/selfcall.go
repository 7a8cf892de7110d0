package workflow

// SelfCalls returns the workflow_call steps of d that call d itself on
// every run: not under a `when` (other than a literal true), and not in
// a list that may not run — an if's or a switch's branch, a try's catch, a
// for_each's items. Each run of such a definition starts another, so its
// runs nest until the runner's cap on child-run depth (Limits.ChildDepth)
// fails the deepest: `starflow validate` warns about them. A self-call
// under a condition (a recursion that ends) is not returned, nor is a
// recursion through another workflow.
func (d *Definition) SelfCalls() []*Step {
	var out []*Step
	var walk func(list []*Step)
	walk = func(list []*Step) {
		for _, s := range list {
			if s.When != nil && s.When != true {
				continue
			}
			switch {
			case s.WorkflowCall != nil && s.WorkflowCall.Workflow == d.Name:
				out = append(out, s)
			case s.Try != nil:
				walk(s.Try.Steps)
				walk(s.Try.Finally)
			case s.RepeatUntil != nil:
				walk(s.RepeatUntil.Steps) // its first iteration always runs
			case s.Parallel != nil:
				for _, name := range s.Parallel.LaneNames() {
					walk(s.Parallel.Lanes[name])
				}
			}
		}
	}
	walk(d.Steps)
	return out
}
