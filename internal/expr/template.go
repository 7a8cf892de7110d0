package expr

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
)

// Template is a parsed, compiled template value. The zero of a nil
// *Template evaluates to nil.
type Template struct {
	kind  tkind
	lit   any         // tLiteral
	parts []part      // tString
	list  []*Template // tList
	keys  []string    // tMap, sorted
	vals  map[string]*Template
}

type tkind int

const (
	tLiteral tkind = iota // no expression anywhere inside
	tExpr                 // exactly one ${{ }}: typed result
	tString               // interpolation
	tList
	tMap
)

type part struct {
	text string
	src  string // expression source when prog != nil
	prog cel.Program
}

// SyntaxError is a template or expression error; Offset is the byte offset
// in the string where the expression starts (for column reporting).
type SyntaxError struct {
	Offset int
	Expr   string
	Err    error
}

func (e *SyntaxError) Error() string {
	if e.Expr == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("expression %q: %v", e.Expr, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// HasExpr reports whether s contains the start of an expression.
func HasExpr(s string) bool { return strings.Contains(s, "${{") }

// ParseTemplate parses and compiles every expression in v. Map keys are
// never templated.
func (e *Env) ParseTemplate(v any) (*Template, error) {
	switch x := v.(type) {
	case string:
		return e.parseString(x)
	case []any:
		t := &Template{kind: tList}
		lit := true
		for _, el := range x {
			c, err := e.ParseTemplate(el)
			if err != nil {
				return nil, err
			}
			lit = lit && c.kind == tLiteral
			t.list = append(t.list, c)
		}
		if lit {
			return &Template{kind: tLiteral, lit: v}, nil
		}
		return t, nil
	case map[string]any:
		t := &Template{kind: tMap, vals: map[string]*Template{}}
		lit := true
		for k, el := range x {
			c, err := e.ParseTemplate(el)
			if err != nil {
				return nil, err
			}
			lit = lit && c.kind == tLiteral
			t.keys = append(t.keys, k)
			t.vals[k] = c
		}
		if lit {
			return &Template{kind: tLiteral, lit: v}, nil
		}
		sort.Strings(t.keys)
		return t, nil
	default:
		return &Template{kind: tLiteral, lit: v}, nil
	}
}

// ParseExpr parses a value that is an expression by nature (`when`,
// `condition`): a bool literal, a `${{ }}` template, or a bare CEL
// expression without the delimiters.
func (e *Env) ParseExpr(v any) (*Template, error) {
	if s, ok := v.(string); ok && !HasExpr(s) {
		p, err := e.Compile(s)
		if err != nil {
			return nil, &SyntaxError{Expr: s, Err: err}
		}
		return &Template{kind: tExpr, parts: []part{{src: s, prog: p}}}, nil
	}
	return e.ParseTemplate(v)
}

func (e *Env) parseString(s string) (*Template, error) {
	if !HasExpr(s) {
		return &Template{kind: tLiteral, lit: s}, nil
	}
	var parts []part
	rest, off := s, 0
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			if rest != "" {
				parts = append(parts, part{text: rest})
			}
			break
		}
		if i > 0 {
			parts = append(parts, part{text: rest[:i]})
		}
		body := rest[i+3:]
		end := closing(body)
		if end < 0 {
			return nil, &SyntaxError{Offset: off + i, Expr: strings.TrimSpace(body), Err: fmt.Errorf("missing closing }}")}
		}
		src := strings.TrimSpace(body[:end])
		p, err := e.Compile(src)
		if err != nil {
			return nil, &SyntaxError{Offset: off + i, Expr: src, Err: err}
		}
		parts = append(parts, part{src: src, prog: p})
		consumed := i + 3 + end + 2
		rest, off = rest[consumed:], off+consumed
	}
	if len(parts) == 1 && parts[0].prog != nil {
		return &Template{kind: tExpr, parts: parts}, nil
	}
	return &Template{kind: tString, parts: parts}, nil
}

// closing finds the "}}" that ends an expression body, skipping string
// literals and balanced braces (CEL map literals contain '}').
func closing(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			// skip a quoted literal (no triple quotes support needed for the delimiter search)
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{':
			depth++
		case '}':
			if depth == 0 && i+1 < len(s) && s[i+1] == '}' {
				return i
			}
			if depth > 0 {
				depth--
			}
		}
	}
	return -1
}

// Exprs returns the source of every expression in t, in order.
func (t *Template) Exprs() []string {
	if t == nil {
		return nil
	}
	var out []string
	switch t.kind {
	case tExpr, tString:
		for _, p := range t.parts {
			if p.prog != nil {
				out = append(out, p.src)
			}
		}
	case tList:
		for _, c := range t.list {
			out = append(out, c.Exprs()...)
		}
	case tMap:
		for _, k := range t.keys {
			out = append(out, t.vals[k].Exprs()...)
		}
	}
	return out
}

// IsLiteral reports whether t contains no expression.
func (t *Template) IsLiteral() bool { return t == nil || t.kind == tLiteral }

// Eval renders t with vars.
func (e *Env) EvalTemplate(ctx context.Context, t *Template, vars map[string]any) (any, error) {
	if t == nil {
		return nil, nil
	}
	switch t.kind {
	case tLiteral:
		return t.lit, nil
	case tExpr:
		v, err := e.Eval(ctx, t.parts[0].prog, vars)
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", t.parts[0].src, err)
		}
		return v, nil
	case tString:
		var b strings.Builder
		for _, p := range t.parts {
			if p.prog == nil {
				b.WriteString(p.text)
				continue
			}
			v, err := e.Eval(ctx, p.prog, vars)
			if err != nil {
				return nil, fmt.Errorf("expression %q: %w", p.src, err)
			}
			if s, ok := v.(string); ok {
				b.WriteString(s)
			} else {
				j, err := json.Marshal(v)
				if err != nil {
					return nil, fmt.Errorf("expression %q: %w", p.src, err)
				}
				b.Write(j)
			}
		}
		return b.String(), nil
	case tList:
		out := make([]any, len(t.list))
		for i, c := range t.list {
			v, err := e.EvalTemplate(ctx, c, vars)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case tMap:
		out := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			v, err := e.EvalTemplate(ctx, t.vals[k], vars)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("expr: unknown template kind %d", t.kind)
}
