package workflow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// edge is a dependency: a step runs after step `to`, because its run_after
// names it (explicit, at pos) or because it follows it in the list.
type edge struct {
	to       int
	explicit bool
	pos      Pos
}

// checkGraph checks step ids (unique in the whole definition, nested
// lists included) and, in each steps list, run_after (targets in the same
// list, no self-reference, no cycle, counting the implicit "after the step
// before" of steps without run_after).
func (d *decoder) checkGraph() {
	byPos := slices.Clone(d.steps)
	slices.SortStableFunc(byPos, func(a, b *stepSrc) int {
		return cmp.Or(cmp.Compare(a.idPos.Line, b.idPos.Line), cmp.Compare(a.idPos.Column, b.idPos.Column))
	})
	first := map[string]*stepSrc{}
	for _, src := range byPos {
		id := src.step.ID
		if id == "" {
			continue
		}
		if f, dup := first[id]; dup {
			d.errorf(src.idPos, "duplicate step id %q (first defined at line %d)", id, f.idPos.Line)
			continue
		}
		first[id] = src
	}
	listOf := map[*stepSrc]*listSrc{}
	for _, l := range d.lists {
		for _, src := range l.steps {
			listOf[src] = l
		}
	}
	for _, l := range d.lists {
		d.checkList(l, func(id string) string {
			if src, ok := first[id]; ok && listOf[src] != nil {
				return listOf[src].desc
			}
			return ""
		})
	}
}

// checkList checks the run_after graph of one steps list. where names the
// list a step of another list is in ("" when there is no such step).
func (d *decoder) checkList(l *listSrc, where func(id string) string) {
	index := map[string]int{}
	var ids []string
	for i, src := range l.steps {
		if id := src.step.ID; id != "" {
			if _, dup := index[id]; !dup {
				index[id] = i
				ids = append(ids, id)
			}
		}
	}
	edges := make([][]edge, len(l.steps))
	for i, src := range l.steps {
		s := src.step
		if !src.hasAfter {
			if i > 0 {
				edges[i] = []edge{{to: i - 1}}
			}
			continue
		}
		for k, id := range s.RunAfter {
			p := src.after[k]
			j, ok := index[id]
			switch {
			case id == s.ID:
				d.errorf(p, "step %q cannot run after itself", id)
			case ok:
				edges[i] = append(edges[i], edge{to: j, explicit: true, pos: p})
			case where(id) != "":
				d.errorf(p, "run_after: step %q is in %s, not in this steps list (%s); run_after names steps of the same list only", id, where(id), l.desc)
			default:
				d.errorf(p, "run_after: no step %q in this steps list%s", id, suggest(id, ids))
			}
		}
	}
	for _, comp := range components(edges) {
		d.reportCycle(l.steps, comp, edges)
	}
}

// components returns the strongly connected components of more than one
// step (Tarjan's algorithm).
func components(edges [][]edge) [][]int {
	n := len(edges)
	index, low := make([]int, n), make([]int, n)
	for i := range index {
		index[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int
	var out [][]int
	counter := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range edges[v] {
			switch w := e.to; {
			case index[w] < 0:
				strong(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				out = append(out, comp)
			}
		}
	}
	for v := range n {
		if index[v] < 0 {
			strong(v)
		}
	}
	return out
}

// reportCycle names the shortest cycle through the first step (in list
// order) of the component comp. That step's edge in the cycle is always an
// explicit run_after entry: implicit edges point backwards in the list.
func (d *decoder) reportCycle(steps []*stepSrc, comp []int, edges [][]edge) {
	start := slices.Min(comp)
	in := map[int]bool{}
	for _, v := range comp {
		in[v] = true
	}
	type hop struct {
		from int
		e    edge
	}
	prev := map[int]hop{}
	queue := []int{start}
	var last hop
	found := false
	for len(queue) > 0 && !found {
		v := queue[0]
		queue = queue[1:]
		for _, e := range edges[v] {
			if !in[e.to] {
				continue
			}
			if e.to == start {
				last, found = hop{v, e}, true
				break
			}
			if _, seen := prev[e.to]; !seen {
				prev[e.to] = hop{v, e}
				queue = append(queue, e.to)
			}
		}
	}
	if !found {
		return // cannot happen for a strongly connected component
	}
	hops := []hop{last}
	for v := last.from; v != start; v = prev[v].from {
		hops = append(hops, prev[v])
	}
	slices.Reverse(hops)
	names := []string{steps[start].step.ID}
	implicit := false
	for _, h := range hops {
		names = append(names, steps[h.e.to].step.ID)
		implicit = implicit || !h.e.explicit
	}
	if len(names) > 12 {
		names = append(append(names[:10:10], fmt.Sprintf("… %d more …", len(names)-11)), names[len(names)-1])
	}
	note := ""
	if implicit {
		note = " (a step without run_after runs after the step before it)"
	}
	at := hops[0].e.pos
	if !hops[0].e.explicit {
		at = steps[start].idPos
	}
	d.errorf(at, "run_after cycle: %s%s", strings.Join(names, " → "), note)
}

// suggest returns ` (did you mean "x"?)` for the candidate closest to
// word, when one is close enough (and there are not too many to compare).
func suggest(word string, candidates []string) string {
	if len(candidates) > 200 {
		return ""
	}
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b, giving up (with a
// large value) for long strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			next := min(row[j]+1, row[j-1]+1, diag+cost)
			diag, row[j] = row[j], next
		}
	}
	return row[len(b)]
}
