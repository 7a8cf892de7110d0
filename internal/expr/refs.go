package expr

import (
	"fmt"
	"strings"
	"unicode"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// Ref is one reference an expression makes to a variable of the
// environment (input, steps, item, error, a loop's `as` name, …).
type Ref struct {
	// Var is the variable's name.
	Var string
	// Path is the chain of constant field names selected from it, in
	// order: steps.a.output and steps['a'].output both give [a output].
	// It stops at the first selection that is not a constant string (a
	// computed index), so steps[name] gives [].
	Path []string
	// Offset is where the reference starts in the expression's source, in
	// characters (runes) from its first character.
	Offset int
}

// Refs parses the CEL expression src (no `${{ }}` delimiters) and returns
// its references to variables, in source order. A name a comprehension
// binds (the `x` of list.map(x, …), and its accumulator) shadows a
// variable of the same name inside the comprehension and is not reported.
// Errors: src does not parse.
func (e *Env) Refs(src string) ([]Ref, error) {
	e.compiling.Lock()
	a, iss := e.env.Parse(src)
	e.compiling.Unlock()
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", oneLine(iss.Err().Error()))
	}
	native := a.NativeRep()
	w := refWalker{info: native.SourceInfo(), shadow: map[string]int{}}
	w.walk(native.Expr())
	return w.out, nil
}

type refWalker struct {
	info   *celast.SourceInfo
	shadow map[string]int // comprehension variables in scope, with a count
	out    []Ref
}

// walk visits x; a chain of selections ending in an identifier is one
// reference.
func (w *refWalker) walk(x celast.Expr) {
	if x == nil {
		return
	}
	if root, path, ok := w.chain(x); ok {
		if w.shadow[root.AsIdent()] == 0 {
			off := 0
			if r, ok := w.info.GetOffsetRange(root.ID()); ok {
				off = int(r.Start)
			}
			w.out = append(w.out, Ref{Var: root.AsIdent(), Path: path, Offset: off})
		}
		w.walkIndexes(x)
		return
	}
	switch x.Kind() {
	case celast.SelectKind:
		w.walk(x.AsSelect().Operand())
	case celast.CallKind:
		c := x.AsCall()
		if c.IsMemberFunction() {
			w.walk(c.Target())
		}
		for _, a := range c.Args() {
			w.walk(a)
		}
	case celast.ListKind:
		for _, el := range x.AsList().Elements() {
			w.walk(el)
		}
	case celast.MapKind:
		for _, en := range x.AsMap().Entries() {
			me := en.AsMapEntry()
			w.walk(me.Key())
			w.walk(me.Value())
		}
	case celast.StructKind:
		for _, f := range x.AsStruct().Fields() {
			w.walk(f.AsStructField().Value())
		}
	case celast.ComprehensionKind:
		c := x.AsComprehension()
		w.walk(c.IterRange())
		w.walk(c.AccuInit())
		vars := []string{c.IterVar(), c.AccuVar()}
		if c.HasIterVar2() {
			vars = append(vars, c.IterVar2())
		}
		for _, v := range vars {
			w.shadow[v]++
		}
		w.walk(c.LoopCondition())
		w.walk(c.LoopStep())
		w.walk(c.Result())
		for _, v := range vars {
			w.shadow[v]--
		}
	}
}

// chain reports whether x is an identifier followed by selections (field
// selections, has() tests, constant-string indexes, optional selections),
// and returns the identifier and the constant field names, stopping at
// the first computed index.
func (w *refWalker) chain(x celast.Expr) (root celast.Expr, path []string, ok bool) {
	var rev []string
	for {
		switch x.Kind() {
		case celast.IdentKind:
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			return x, rev, true
		case celast.SelectKind:
			s := x.AsSelect()
			rev = append(rev, s.FieldName())
			x = s.Operand()
		case celast.CallKind:
			c := x.AsCall()
			if c.IsMemberFunction() || len(c.Args()) != 2 {
				return nil, nil, false
			}
			switch c.FunctionName() {
			case operators.Index, operators.OptIndex, operators.OptSelect:
			default:
				return nil, nil, false
			}
			if s, ok := constString(c.Args()[1]); ok {
				rev = append(rev, s)
			} else {
				rev = rev[:0] // a computed index: the path is known up to here only
			}
			x = c.Args()[0]
		default:
			return nil, nil, false
		}
	}
}

// walkIndexes visits the computed indexes of a selection chain (they may
// reference variables themselves).
func (w *refWalker) walkIndexes(x celast.Expr) {
	for {
		switch x.Kind() {
		case celast.SelectKind:
			x = x.AsSelect().Operand()
		case celast.CallKind:
			c := x.AsCall()
			if _, ok := constString(c.Args()[1]); !ok {
				w.walk(c.Args()[1])
			}
			x = c.Args()[0]
		default:
			return
		}
	}
}

func constString(x celast.Expr) (string, bool) {
	if x.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := x.AsLiteral().(types.String)
	return string(s), ok
}

// Span is one expression of a template string: its source (trimmed, as
// compiled) and the byte offset in the string where that source starts.
type Span struct {
	Src    string
	Offset int
}

// Spans returns the `${{ }}` expressions of the template string s, in
// order. An unclosed one ends the list (ParseTemplate reports it).
func Spans(s string) []Span {
	var out []Span
	rest, off := s, 0
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			return out
		}
		body := rest[i+3:]
		end := closing(body)
		if end < 0 {
			return out
		}
		raw := body[:end]
		lead := len(raw) - len(strings.TrimLeftFunc(raw, unicode.IsSpace))
		out = append(out, Span{Src: strings.TrimSpace(raw), Offset: off + i + 3 + lead})
		consumed := i + 3 + end + 2
		rest, off = rest[consumed:], off+consumed
	}
}
