package engine

import (
	"context"
	"sort"

	"github.com/starflow/starflow/workflow"
)

// DAGConcurrency bounds how many steps of one steps list run at once when
// the list is a run_after graph.
const DAGConcurrency = 8

// hasGraph reports whether any step of list names its dependencies with
// run_after; a list without run_after is a plain sequence.
func hasGraph(list []*workflow.Step) bool {
	for _, s := range list {
		if s.RunAfter != nil {
			return true
		}
	}
	return false
}

// dagResult is what one step of a graph left: the frame it ran in and its
// output or error.
type dagResult struct {
	i     int
	frame *frame
	out   any
	err   error
}

// execDAG runs a steps list that is a run_after graph: a step starts once
// every step it depends on has finished (succeeded or skipped), and steps
// whose dependencies are met run concurrently, at most DAGConcurrency at a
// time, started in list order.
//
// Each step runs in a frame of its own (same scope) that sees the list's
// context as of the list's start plus the changes of its transitive
// dependencies, applied in list order — never a sibling it does not depend
// on, whose progress would depend on timing. At the join every step's
// changes are merged into f in list order, so a resumed run (some steps
// restored, others executed, in another order) ends with exactly the
// output of an uninterrupted one.
//
// When a step fails, no further step starts, steps in flight finish, the
// steps that never started are recorded skipped, and the list fails with
// the failure of the first failed step in list order.
func (rs *runState) execDAG(ctx context.Context, f *frame, list []*workflow.Step) (any, error) {
	n := len(list)
	idx := make(map[string]int, n)
	for i, s := range list {
		idx[s.ID] = i
	}
	deps := make([][]int, n)
	for i := range list {
		for _, d := range workflow.DependsOn(list, i) {
			deps[i] = append(deps[i], idx[d])
		}
	}
	closure := transitive(deps)

	results := make([]*dagResult, n)
	started := make([]bool, n)
	finished := make(chan *dagResult)
	running, failed := 0, false
	ready := func(i int) bool {
		for _, d := range deps[i] {
			if r := results[d]; r == nil || r.err != nil {
				return false
			}
		}
		return true
	}
	for {
		if !failed && ctx.Err() == nil {
			for i := 0; i < n && running < DAGConcurrency; i++ {
				if started[i] || !ready(i) {
					continue
				}
				started[i] = true
				running++
				c := f.child(f.scope)
				for _, d := range closure[i] {
					dep := results[d].frame
					for k, v := range dep.delta {
						c.vars[k] = v
					}
					c.steps[list[d].ID] = dep.steps[list[d].ID]
				}
				go func(i int, c *frame) {
					out, err := rs.traceStep(ctx, c, list[i])
					finished <- &dagResult{i: i, frame: c, out: out, err: err}
				}(i, c)
			}
		}
		if running == 0 {
			break
		}
		r := <-finished
		running--
		results[r.i] = r
		if r.err != nil && rs.errRank(r.err) > 1 {
			failed = true // a parked step only holds back its dependents
		}
	}

	// The join, in list order.
	var firstErr error
	for i, r := range results {
		if r == nil {
			continue
		}
		if r.err != nil {
			if rs.errRank(r.err) > rs.errRank(firstErr) {
				firstErr = r.err
			}
			continue
		}
		f.merge(r.frame)
		f.steps[list[i].ID] = r.frame.steps[list[i].ID]
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = context.Cause(ctx)
	}
	if firstErr != nil {
		if !rs.stopping(firstErr) {
			if err := rs.skipRemaining(f, list, started, "a step it depends on did not succeed"); err != nil {
				return nil, err
			}
		}
		return nil, firstErr
	}
	for i := range list {
		if !started[i] {
			// Unreachable for a validated definition (no cycles).
			return nil, rs.cycleError(f)
		}
	}
	return results[n-1].out, nil
}

// transitive returns, for every step, the steps it depends on directly or
// indirectly, in list order.
func transitive(deps [][]int) [][]int {
	n := len(deps)
	memo := make([]map[int]bool, n)
	var visit func(i int, seen map[int]bool) map[int]bool
	visit = func(i int, seen map[int]bool) map[int]bool {
		if memo[i] != nil {
			return memo[i]
		}
		if seen[i] {
			return map[int]bool{} // a cycle: validation reports it
		}
		seen[i] = true
		all := map[int]bool{}
		for _, d := range deps[i] {
			all[d] = true
			for k := range visit(d, seen) {
				all[k] = true
			}
		}
		memo[i] = all
		return all
	}
	out := make([][]int, n)
	for i := range deps {
		for d := range visit(i, map[int]bool{}) {
			out[i] = append(out[i], d)
		}
		sort.Ints(out[i])
	}
	return out
}
