package expr

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// cel-go charges a function's runtime cost after the function returns,
// and checks the time limit only between steps of the evaluation, never
// inside one function. A few functions of the extension libraries do work
// that grows with the product of their arguments' sizes, or build results
// far larger than their arguments: one call on two lists of 50,000 items
// ran for 35 s to 90 s before its evaluation could fail; the JSON and YAML
// functions work on values and documents of any size. Each such
// overload is bound again here, to its own implementation behind a guard
// that computes the call's cost from its arguments first and fails at once
// when that alone exceeds the cost limit. (cel-go's tracker still charges
// the refused call from its arguments, and then often reports the limit
// itself: either way Eval gives the cost-limit error.)

// costGuardMsg starts the error of a call the guard refused.
const costGuardMsg = "call exceeds the cost limit"

// guarded maps an overload id to the cost of a call given its arguments
// (the receiver first) and the limit, in cel-go's units: the charge cel-go
// itself makes for the call where that depends on the arguments alone, and
// otherwise a bound on the work. Set operations count a nested element by
// its size (weight), since comparing two lists of lists compares their
// elements; they stop counting past the limit, so a cost over the limit
// is a lower bound.
var guarded = map[string]func(args []ref.Val, limit uint64) uint64{
	"list_sets_contains_list":   setCost(1),
	"list_sets_equivalent_list": setCost(2),
	"list_sets_intersects_list": setCost(1),
	"list_hasAll_list":          setCost(1),
	"list_hasOnly_list":         setCost(1),
	"list_hasAny_list":          setCost(1),
	"list_hasExactly_list":      setCost(2),
	"list_distinct": func(args []ref.Val, limit uint64) uint64 {
		n := length(args[0])
		return cost.SafeAdd(1, cost.SafeMultiply(2, cost.SafeMultiply(n, weight(args[0], limit/max(n, 1)+1))))
	},
	"string_index_of_string":           searchCost,
	"string_index_of_string_int":       searchCost,
	"string_last_index_of_string":      searchCost,
	"string_last_index_of_string_int":  searchCost,
	"string_replace_string_string":     replaceCost,
	"string_replace_string_string_int": replaceCost,
	"list_join_string":                 joinCost,
	// The JSON and YAML functions, priced in encoders.go.
	"json_encode_dyn":        encodeCost(jsonEncodePrice),
	"yaml_encode_dyn":        encodeCost(yamlEncodePrice),
	"json_parse_string":      jsonParseCost,
	"json_parse_string_type": jsonParseCost,
	"yaml_parse_string":      yamlParseGuard,
	"yaml_parse_string_type": yamlParseGuard,
}

// rebound maps an overload id to the implementation bound in its place,
// behind its guard.
var rebound = map[string]*functions.Overload{
	"json_encode_dyn": {Operator: "json_encode_dyn", Unary: jsonEncode},
}

// refusal is the error of a call a guard refused, with the cost it was
// refused at (which is what the call is charged, when cel-go's charge is
// the engine's: encoders.go).
type refusal struct {
	call string
	cost uint64
}

func (r *refusal) Error() string {
	return fmt.Sprintf("%s: %s would cost at least %d", costGuardMsg, r.call, r.cost)
}

// guardOptions returns the options that bind every guarded overload of e
// again, behind its guard.
func guardOptions(e *cel.Env, limit uint64) ([]cel.EnvOption, error) {
	var opts []cel.EnvOption
	found := 0
	for name, fn := range e.Functions() {
		impls, err := fn.Bindings()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, o := range fn.OverloadDecls() {
			costOf, ok := guarded[o.ID()]
			if !ok {
				continue
			}
			var impl *functions.Overload
			for _, b := range impls {
				if b.Operator == o.ID() {
					impl = b
				}
			}
			if impl == nil {
				return nil, fmt.Errorf("%s: overload %s has no binding", name, o.ID())
			}
			if r, ok := rebound[o.ID()]; ok {
				impl = r
			}
			found++
			opts = append(opts, cel.Function(name, guardOverload(name, o.ID(), o.IsMemberFunction(), o.ArgTypes(), o.ResultType(), impl, costOf, limit)))
		}
	}
	if found != len(guarded) {
		// An overload was renamed or dropped: its replacement would go
		// unguarded.
		return nil, fmt.Errorf("found %d of the %d guarded overloads", found, len(guarded))
	}
	return opts, nil
}

func guardOverload(name, id string, member bool, args []*cel.Type, result *cel.Type, impl *functions.Overload,
	costOf func([]ref.Val, uint64) uint64, limit uint64) cel.FunctionOpt {
	check := func(vals ...ref.Val) ref.Val {
		if c := costOf(vals, limit); c > limit {
			return types.WrapErr(&refusal{call: name, cost: c})
		}
		return nil
	}
	var bind cel.OverloadOpt
	switch {
	case len(args) == 1 && impl.Unary != nil:
		bind = cel.UnaryBinding(func(a ref.Val) ref.Val {
			if err := check(a); err != nil {
				return err
			}
			return impl.Unary(a)
		})
	case len(args) == 2 && impl.Binary != nil:
		bind = cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			if err := check(a, b); err != nil {
				return err
			}
			return impl.Binary(a, b)
		})
	default:
		bind = cel.FunctionBinding(func(vals ...ref.Val) ref.Val {
			if err := check(vals...); err != nil {
				return err
			}
			return impl.Function(vals...)
		})
	}
	if member {
		return cel.MemberOverload(id, args, result, bind)
	}
	return cel.Overload(id, args, result, bind)
}

// setCost bounds a set operation of two lists: each element of one is
// compared with each of the other, and comparing two elements costs at
// most the weight of either.
func setCost(factor uint64) func(args []ref.Val, limit uint64) uint64 {
	return func(args []ref.Val, limit uint64) uint64 {
		a, b := args[0], args[1]
		na, nb := length(a), length(b)
		pairs := min(cost.SafeMultiply(na, weight(b, limit/max(na, 1)+1)), cost.SafeMultiply(nb, weight(a, limit/max(nb, 1)+1)))
		return cost.SafeAdd(1, cost.SafeMultiply(factor, pairs))
	}
}

// searchCost is cel-go's charge for s.indexOf(t) and s.lastIndexOf(t),
// which compare t at every position of s.
func searchCost(args []ref.Val, _ uint64) uint64 {
	return cost.SafeAdd(1, scan(cost.SafeMultiply(runes(args[0]), runes(args[1]))))
}

// replaceCost is cel-go's charge for s.replace(old, new[, n]): a search,
// and the length of the result, computed here without building it.
func replaceCost(args []ref.Val, _ uint64) uint64 {
	s, _ := args[0].(types.String)
	old, _ := args[1].(types.String)
	repl, _ := args[2].(types.String)
	n := int64(-1)
	if len(args) > 3 {
		if i, ok := args[3].(types.Int); ok {
			n = int64(i)
		}
	}
	matches := uint64(strings.Count(string(s), string(old)))
	if n >= 0 {
		matches = min(matches, uint64(n))
	}
	sLen, oldLen, replLen := runes(s), runes(old), runes(repl)
	out := cost.SafeAdd(cost.SafeSubtract(sLen, cost.SafeMultiply(matches, oldLen)), cost.SafeMultiply(matches, replLen))
	return cost.SafeAdd(1, scan(cost.SafeMultiply(max(sLen, 1), max(oldLen, 1))), out)
}

// joinCost is cel-go's charge for l.join(sep): a scan of the list and the
// length of the result, computed here without building it.
func joinCost(args []ref.Val, _ uint64) uint64 {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return 0
	}
	n := length(l)
	out := cost.SafeMultiply(max(n, 1)-1, runes(args[1]))
	for it := l.Iterator(); it.HasNext() == types.True; {
		out = cost.SafeAdd(out, runes(it.Next()))
	}
	return cost.SafeAdd(1, scan(n+1), out)
}

// scan is the cost of traversing n characters.
func scan(n uint64) uint64 {
	return cost.SafeMultiplyByFactor(n, cost.StringTraversalCostFactor)
}

func runes(v ref.Val) uint64 {
	s, _ := v.(types.String)
	return uint64(utf8.RuneCountInString(string(s)))
}

func length(v ref.Val) uint64 {
	if l, ok := v.(traits.Lister); ok {
		return uint64(l.Size().(types.Int))
	}
	return 1
}

// weight is the number of values in v counted down to its scalars, at
// least 1: what comparing v with another value may cost. It stops
// counting at limit, so weighing a huge value costs little.
func weight(v ref.Val, limit uint64) uint64 {
	var w uint64
	switch x := v.(type) {
	case traits.Lister:
		for it := x.Iterator(); w < limit && it.HasNext() == types.True; {
			w = cost.SafeAdd(w, weight(it.Next(), limit-w))
		}
	case traits.Mapper:
		for it := x.Iterator(); w < limit && it.HasNext() == types.True; {
			w = cost.SafeAdd(w, 1, weight(x.Get(it.Next()), limit-w))
		}
	}
	return max(w, 1)
}
