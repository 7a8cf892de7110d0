package expr

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"go.yaml.in/yaml/v3"
)

// cel-go v0.33.2 gives json.encode, json.parse, yaml.encode and yaml.parse
// a cost model that charges the largest possible cost (ext/encoders.go,
// unboundedCostModel), so that every call exceeds any cost limit. The
// engine prices them itself, by the size of what they work on, in units
// of about the time cel-go's own unit stands for (25 ns to 50 ns of work on
// a list or a string, measured). The prices below were set from each
// function's measured time per value and per byte: calls priced just under
// the default limit of 1,000,000 ran for 2 ms to 60 ms, most 15 ms to 50 ms.
//
//   - json.encode(x): 5 for each value in x — x itself, and each element,
//     key and value of its lists and maps, all the way down — and 1 for
//     every 2 bytes of each string or bytes value, rounded up;
//   - yaml.encode(x): 30 for each value and 2 for each byte, a value
//     nested d levels deep costing 1 + d/10 times as much: cel-go builds
//     the text of each level again, and YAML indents each line by its
//     depth (a map nested 9,000 levels deep gave 162 MB of text in 1.4 s);
//   - json.parse(s): 1 for each byte of s, whose value has at most one
//     value per byte;
//   - yaml.parse(s): 10 for each byte of s, and for its result 10 for each
//     value and 1 for each byte of its strings. A YAML alias repeats the
//     value of its anchor, so a short document can stand for a huge value
//     (nine levels of nine aliases: a billion strings). cel-go expands
//     the aliases; go-yaml refuses a document of more than a thousand
//     values whose aliases make up more than 99% of them (10% past four
//     million), which stops the billion laughs but not a 40 KB string
//     repeated by 900 aliases: 36 MB of JSON, 149 MB allocated.
//
// Each price is both a guard (guards.go: computed before the call, which
// is refused when its price alone exceeds the limit; a yaml.parse of a
// document with a `*`, which every alias starts with, parses the document
// first to count what its aliases expand to) and, through cel.CostModel,
// the call's charge at run time and its static estimate. A call is
// charged at most the limit plus one: more fails the evaluation all the
// same, and so every estimate is finite.
//
// json.encode is also bound again to an implementation that writes the
// keys of each map in order (jsonEncode).

// valuePrice prices a value by its parts.
type valuePrice struct {
	perValue uint64  // each value: a scalar, a list or map, each element, key and value of those
	perByte  float64 // each byte of a string or bytes value
	depthDiv uint64  // when not 0, a value nested d levels deep costs 1 + d/depthDiv times as much
}

var (
	jsonEncodePrice = valuePrice{perValue: 5, perByte: 0.5}
	yamlEncodePrice = valuePrice{perValue: 30, perByte: 2, depthDiv: 10}
	yamlResultPrice = valuePrice{perValue: 10, perByte: 1} // of what yaml.parse returns
)

// Prices of parsing, per byte of the string parsed.
const (
	jsonParsePerByte = 1
	yamlParsePerByte = 10
)

// of returns the price of v. It stops counting past limit, so pricing a
// huge value costs little, and a price over limit is a lower bound.
func (p valuePrice) of(v ref.Val, limit uint64) uint64 {
	var total uint64
	p.add(&total, v, 0, limit)
	return total
}

func (p valuePrice) add(total *uint64, v ref.Val, depth, limit uint64) {
	own := p.perValue
	switch x := v.(type) {
	case types.String:
		own = cost.SafeAdd(own, cost.SafeMultiplyByFactor(uint64(len(x)), p.perByte))
	case types.Bytes:
		own = cost.SafeAdd(own, cost.SafeMultiplyByFactor(uint64(len(x)), p.perByte))
	}
	*total = cost.SafeAdd(*total, p.atDepth(own, depth))
	switch x := v.(type) {
	case traits.Lister:
		// Each element costs at least perValue: a list too long for the
		// limit is priced without going through it.
		if floor := cost.SafeAdd(*total, cost.SafeMultiply(sizeOf(x), p.perValue)); floor > limit {
			*total = floor
			return
		}
		for it := x.Iterator(); *total <= limit && it.HasNext() == types.True; {
			p.add(total, it.Next(), depth+1, limit)
		}
	case traits.Mapper:
		if floor := cost.SafeAdd(*total, cost.SafeMultiply(sizeOf(x), 2*p.perValue)); floor > limit {
			*total = floor
			return
		}
		for it := x.Iterator(); *total <= limit && it.HasNext() == types.True; {
			k := it.Next()
			p.add(total, k, depth+1, limit)
			p.add(total, x.Get(k), depth+1, limit)
		}
	}
}

func sizeOf(v traits.Sizer) uint64 {
	n, _ := v.Size().(types.Int)
	return uint64(max(n, 0))
}

// atDepth is the price c of a value nested depth levels deep.
func (p valuePrice) atDepth(c, depth uint64) uint64 {
	if p.depthDiv == 0 || depth == 0 {
		return c
	}
	return cost.SafeAdd(c, cost.SafeMultiply(c, depth)/p.depthDiv)
}

// estimate bounds the price of a value of the checked type t and the size
// estimate sz (cel-go's: a string's code points, a list's elements, a
// map's entries), nested depth levels deep. A value whose type or size
// is not known has no upper bound but its limit.
func (p valuePrice) estimate(t *types.Type, sz cost.SizeEstimate, depth uint64) (lo, hi uint64) {
	own := p.atDepth(p.perValue, depth)
	if t == nil {
		return own, math.MaxUint64
	}
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.NullTypeKind,
		types.TimestampKind, types.DurationKind:
		return own, own
	case types.StringKind, types.BytesKind:
		maxBytes := sz.Max
		if t.Kind() == types.StringKind {
			maxBytes = cost.SafeMultiply(sz.Max, utf8.UTFMax)
		}
		lo = p.atDepth(cost.SafeAdd(p.perValue, cost.SafeMultiplyByFactor(sz.Min, p.perByte)), depth)
		hi = p.atDepth(cost.SafeAdd(p.perValue, cost.SafeMultiplyByFactor(maxBytes, p.perByte)), depth)
		return lo, hi
	case types.ListKind:
		elo, ehi := p.estimate(typeParam(t, 0), sizeOrUnknown(sz.Elem), depth+1)
		return cost.SafeAdd(own, cost.SafeMultiply(sz.Min, elo)), cost.SafeAdd(own, cost.SafeMultiply(sz.Max, ehi))
	case types.MapKind:
		klo, khi := p.estimate(typeParam(t, 0), sizeOrUnknown(sz.Key), depth+1)
		vlo, vhi := p.estimate(typeParam(t, 1), sizeOrUnknown(sz.Elem), depth+1)
		return cost.SafeAdd(own, cost.SafeMultiply(sz.Min, cost.SafeAdd(klo, vlo))),
			cost.SafeAdd(own, cost.SafeMultiply(sz.Max, cost.SafeAdd(khi, vhi)))
	}
	return own, math.MaxUint64
}

func typeParam(t *types.Type, i int) *types.Type {
	if ps := t.Parameters(); i < len(ps) {
		return ps[i]
	}
	return nil
}

func sizeOrUnknown(sz *cost.SizeEstimate) cost.SizeEstimate {
	if sz == nil {
		return cost.UnknownSizeEstimate()
	}
	return *sz
}

// encodeCost is the cost of json.encode(x) or yaml.encode(x) priced by p.
func encodeCost(p valuePrice) func(args []ref.Val, limit uint64) uint64 {
	return func(args []ref.Val, limit uint64) uint64 {
		return cost.SafeAdd(cost.CallCost, p.of(args[0], limit))
	}
}

// jsonParseCost is the cost of json.parse(s[, type]).
func jsonParseCost(args []ref.Val, _ uint64) uint64 {
	s, _ := args[0].(types.String)
	return cost.SafeAdd(cost.CallCost, cost.SafeMultiply(uint64(len(s)), jsonParsePerByte))
}

// yamlInputCost is the cost of parsing s, before its result.
func yamlInputCost(s types.String) uint64 {
	return cost.SafeAdd(cost.CallCost, cost.SafeMultiply(uint64(len(s)), yamlParsePerByte))
}

// yamlParseGuard prices yaml.parse(s[, type]) before it runs: the input,
// and, when s may hold an alias, the price of the value it decodes to,
// counted on the parsed document without expanding its aliases. Without
// an alias the value is no larger than s, and the charge after the call
// (yamlParseCharge) adds its price.
func yamlParseGuard(args []ref.Val, limit uint64) uint64 {
	s, _ := args[0].(types.String)
	c := yamlInputCost(s)
	if c > limit || !strings.Contains(string(s), "*") {
		return c
	}
	return cost.SafeAdd(c, yamlDocumentPrice(string(s), limit-c))
}

// yamlParseCharge is what yaml.parse(s[, type]) is charged after it ran:
// the input and the price of the result.
func yamlParseCharge(args []ref.Val, result ref.Val, limit uint64) uint64 {
	s, _ := args[0].(types.String)
	c := yamlInputCost(s)
	if o, ok := result.(*types.Optional); ok && o.HasValue() && c <= limit {
		c = cost.SafeAdd(c, yamlResultPrice.of(o.GetValue(), limit-c))
	}
	return c
}

// yamlDocumentPrice is yamlResultPrice of what the YAML document s decodes
// to, aliases expanded, computed on its nodes: each anchor's value is
// priced once, however many aliases repeat it. It stops counting past
// limit. A document cel-go cannot parse costs nothing more: yaml.parse
// gives none for it.
func yamlDocumentPrice(s string, limit uint64) uint64 {
	var doc yaml.Node
	if err := yaml.NewDecoder(strings.NewReader(s)).Decode(&doc); err != nil {
		return 0
	}
	w := yamlWeigher{limit: limit, priced: map[*yaml.Node]uint64{}, open: map[*yaml.Node]bool{}}
	return w.price(&doc)
}

type yamlWeigher struct {
	limit  uint64
	priced map[*yaml.Node]uint64 // the anchors priced so far
	open   map[*yaml.Node]bool   // the anchors being priced: an alias inside one repeats it
}

func (w *yamlWeigher) price(n *yaml.Node) uint64 {
	p := yamlResultPrice
	switch n.Kind {
	case yaml.AliasNode:
		a := n.Alias
		if a == nil || w.open[a] {
			return p.perValue // an anchor that contains itself, which go-yaml refuses to decode
		}
		if c, ok := w.priced[a]; ok {
			return c
		}
		w.open[a] = true
		c := w.price(a)
		delete(w.open, a)
		w.priced[a] = c
		return c
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!binary", "!!timestamp": // what becomes a string
			return cost.SafeAdd(p.perValue, cost.SafeMultiplyByFactor(uint64(len(n.Value)), p.perByte))
		}
		return p.perValue
	}
	var c uint64
	if n.Kind != yaml.DocumentNode {
		c = p.perValue
	}
	for _, child := range n.Content {
		if c > w.limit {
			break
		}
		c = cost.SafeAdd(c, w.price(child))
	}
	return c
}

// encoderCostModel replaces cel-go's cost models of the JSON and YAML
// functions by the prices above, under the limit.
func encoderCostModel(limit uint64) cel.EnvOption {
	model := func(id string, estimate cost.FunctionEstimator, charge func([]ref.Val, ref.Val, uint64) uint64) cost.OverloadModel {
		return cost.Overload(id, cost.ManualCost(estimate, chargeUpTo(limit, charge)))
	}
	fromArgs := func(c func([]ref.Val, uint64) uint64) func([]ref.Val, ref.Val, uint64) uint64 {
		return func(args []ref.Val, _ ref.Val, limit uint64) uint64 { return c(args, limit) }
	}
	return cel.CostModel(
		model("json_encode_dyn", estimateEncode(jsonEncodePrice, limit), fromArgs(encodeCost(jsonEncodePrice))),
		model("yaml_encode_dyn", estimateEncode(yamlEncodePrice, limit), fromArgs(encodeCost(yamlEncodePrice))),
		model("json_parse_string", estimateParse(jsonParsePerByte, true, limit), fromArgs(jsonParseCost)),
		model("json_parse_string_type", estimateParse(jsonParsePerByte, true, limit), fromArgs(jsonParseCost)),
		model("yaml_parse_string", estimateParse(yamlParsePerByte, false, limit), yamlParseCharge),
		model("yaml_parse_string_type", estimateParse(yamlParsePerByte, false, limit), yamlParseCharge),
	)
}

// chargeUpTo returns the runtime charge of a call: the cost a guard
// refused it at, or else charge, and in either case at most limit+1.
func chargeUpTo(limit uint64, charge func([]ref.Val, ref.Val, uint64) uint64) cost.FunctionTracker {
	return func(args []ref.Val, result ref.Val) *uint64 {
		var c uint64
		var r *refusal
		if e, ok := result.(*types.Err); ok && errors.As(e, &r) {
			c = r.cost
		} else {
			c = charge(args, result, limit)
		}
		c = min(c, cost.SafeAdd(limit, 1))
		return &c
	}
}

func estimateEncode(p valuePrice, limit uint64) cost.FunctionEstimator {
	return func(est cost.Estimator, _ *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
		if len(args) != 1 {
			return nil
		}
		lo, hi := p.estimate(args[0].Type(), cost.EstimateSize(est, args[0]), 0)
		return callEstimate(lo, hi, limit)
	}
}

// estimateParse estimates a parse of perByte for each byte of its string;
// when bounded, the string's length bounds the result's price too.
func estimateParse(perByte uint64, bounded bool, limit uint64) cost.FunctionEstimator {
	return func(est cost.Estimator, _ *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
		if len(args) == 0 {
			return nil
		}
		sz := cost.EstimateSize(est, args[0])
		hi := uint64(math.MaxUint64)
		if bounded {
			hi = cost.SafeMultiply(cost.SafeMultiply(sz.Max, utf8.UTFMax), perByte)
		}
		return callEstimate(cost.SafeMultiply(sz.Min, perByte), hi, limit)
	}
}

func callEstimate(lo, hi, limit uint64) *cost.CallEstimate {
	most := cost.SafeAdd(limit, 1)
	return &cost.CallEstimate{CostEstimate: cost.CostEstimate{
		Min: min(cost.SafeAdd(cost.CallCost, lo), most),
		Max: min(cost.SafeAdd(cost.CallCost, hi), most),
	}}
}

// jsonEncode is json.encode with the keys of each map in order. cel-go's
// writes a map's entries in the map's iteration order, which for most maps
// (the input's, a literal's) is Go's random one, while an expression must
// give the same text each time it runs. Lists and maps are written here,
// every other value by cel-go (ext.JSONEncode).
func jsonEncode(v ref.Val) ref.Val {
	var b strings.Builder
	if err := writeJSON(&b, v); err != nil {
		return types.WrapErr(err)
	}
	return types.String(b.String())
}

func writeJSON(b *strings.Builder, v ref.Val) error {
	switch x := v.(type) {
	case traits.Lister:
		b.WriteByte('[')
		for it, first := x.Iterator(), true; it.HasNext() == types.True; first = false {
			if !first {
				b.WriteByte(',')
			}
			if err := writeJSON(b, it.Next()); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case traits.Mapper:
		return writeJSONMap(b, x)
	}
	s, err := ext.JSONEncode(v)
	if err != nil {
		return err
	}
	b.WriteString(s)
	return nil
}

// writeJSONMap writes m's entries in the order of their keys' text; keys
// that are not strings are written as cel-go does, as the text of their
// JSON (1 is "1"), and keys of the same text (1 and '1') in the order of
// their types' names.
func writeJSONMap(b *strings.Builder, m traits.Mapper) error {
	type entry struct {
		key, typ string
		val      ref.Val
	}
	var entries []entry
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		ks, ok := k.(types.String)
		if !ok {
			s, err := ext.JSONEncode(k)
			if err != nil {
				return err
			}
			ks = types.String(s)
		}
		entries = append(entries, entry{key: string(ks), typ: k.Type().TypeName(), val: m.Get(k)})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.typ, b.typ)
	})
	b.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		q, err := json.Marshal(e.key)
		if err != nil {
			return err
		}
		b.Write(q)
		b.WriteByte(':')
		if err := writeJSON(b, e.val); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}
