package workflow

import (
	"errors"
	"slices"
	"strings"

	"github.com/starflow/starflow/internal/expr"
)

// Loop variables: a for_each may bind its item to a name of its own (`as:
// order`), but the expression environment (internal/expr) declares a fixed
// set of names (input, variables, steps, item, …), and CEL refuses an
// undeclared name. So that such expressions validate, an expression inside
// a for_each body that fails only because it uses the loop variables is
// checked again with each of them read as `item` (which is declared, with
// the same dynamic type). Error messages keep the author's text.
//
// The engine must declare the `as` names when it compiles the expressions
// of a for_each body; this rewriting is for validation only.

// compile parses the template s (bare: an expression by nature, see
// expr.Env.ParseExpr) with the loop variables in scope. It returns the
// template, and the string that was compiled: s, or s with the loop
// variables renamed.
func (d *decoder) compile(s string, bare bool) (*expr.Template, string, error) {
	parse := d.opts.Expr.ParseTemplate
	if bare {
		parse = d.opts.Expr.ParseExpr
	}
	tpl, err := parse(s)
	if err == nil || len(d.loopVars) == 0 {
		return tpl, s, err
	}
	var se *expr.SyntaxError
	if !errors.As(err, &se) || se.Err == nil {
		return nil, s, err
	}
	issues := strings.Split(se.Err.Error(), celIssueSep)
	rest := slices.DeleteFunc(slices.Clone(issues), func(issue string) bool { return d.isLoopVarIssue(issue) })
	if len(rest) == len(issues) {
		return nil, s, err // the loop variables are not the problem
	}
	renamed, back := renameLoopVars(s, d.loopVars, bare)
	tpl, err2 := parse(renamed)
	if err2 == nil {
		return tpl, renamed, nil
	}
	if len(rest) > 0 {
		// The author's own text, without the complaints about the loop
		// variables.
		return nil, s, &expr.SyntaxError{Offset: se.Offset, Expr: se.Expr, Err: errors.New(strings.Join(rest, celIssueSep))}
	}
	// The first expression was fine once renamed; a later one in the same
	// string is not.
	if errors.As(err2, &se) {
		c := *se
		c.Offset = back(se.Offset)
		return nil, s, &c
	}
	return nil, s, err2
}

// celIssueSep separates the issues of one CEL error (internal/expr trims
// the first one's prefix and puts the rest on one line).
const celIssueSep = " ERROR: <input>:"

// isLoopVarIssue reports whether a CEL issue is an undeclared loop
// variable.
func (d *decoder) isLoopVarIssue(issue string) bool {
	for _, v := range d.loopVars {
		if strings.Contains(issue, "undeclared reference to '"+v+"'") {
			return true
		}
	}
	return false
}

// renameLoopVars replaces, in the expressions of the template s (all of s
// when bare), every reference to one of vars by `item`. back maps an
// offset in the result to the offset in s.
func renameLoopVars(s string, vars []string, bare bool) (string, func(int) int) {
	type edit struct{ at, oldLen, newLen int } // at: offset in s
	var edits []edit
	var b strings.Builder
	last := 0
	renameCEL := func(start, end int) {
		for _, id := range celIdents(s[start:end]) {
			at := start + id.at
			if !slices.Contains(vars, s[at:at+id.n]) {
				continue
			}
			b.WriteString(s[last:at])
			b.WriteString(DefaultItemName)
			edits = append(edits, edit{at, id.n, len(DefaultItemName)})
			last = at + id.n
		}
	}
	if bare && !expr.HasExpr(s) {
		renameCEL(0, len(s))
	} else {
		for i := 0; ; {
			j := strings.Index(s[i:], "${{")
			if j < 0 {
				break
			}
			start := i + j + 3
			end := closingBraces(s[start:])
			if end < 0 {
				break
			}
			renameCEL(start, start+end)
			i = start + end + 2
		}
	}
	b.WriteString(s[last:])
	back := func(off int) int {
		delta := 0
		for _, e := range edits {
			if off < e.at+delta+e.newLen {
				break
			}
			delta += e.newLen - e.oldLen
		}
		return off - delta
	}
	return b.String(), back
}

// closingBraces finds the "}}" that ends an expression body, as
// internal/expr does: skipping quoted literals and balanced braces.
func closingBraces(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
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

// ident is an identifier of a CEL expression that names a variable: at
// byte offset at, n bytes long.
type ident struct{ at, n int }

// celIdents lists the identifiers of the CEL source src that can name a
// variable: not inside a string literal or a comment, not a field
// selection (after '.'), not a function call (before '(').
func celIdents(src string) []ident {
	var out []ident
	isStart := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	prevSignificant := byte(0)
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '"' || c == '\'':
			i = skipString(src, i, false)
		case c == '`':
			for i++; i < len(src) && src[i] != '`'; i++ {
			}
			i++
		case c >= '0' && c <= '9':
			for i < len(src) && isPart(src[i]) {
				i++
			}
		case isStart(c):
			j := i
			for j < len(src) && isPart(src[j]) {
				j++
			}
			word := src[i:j]
			if j < len(src) && (src[j] == '"' || src[j] == '\'') && isStringPrefix(word) {
				i = skipString(src, j, strings.ContainsAny(word, "rR"))
				break
			}
			k := j
			for k < len(src) && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n' || src[k] == '\r') {
				k++
			}
			if prevSignificant != '.' && (k == len(src) || src[k] != '(') {
				out = append(out, ident{i, j - i})
			}
			i = j
		default:
			i++
		}
		prevSignificant = c
	}
	return out
}

// isStringPrefix reports whether word can prefix a CEL string literal
// (raw r, bytes b, or both).
func isStringPrefix(word string) bool {
	switch strings.ToLower(word) {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// skipString returns the offset after the string literal that starts with
// the quote at src[i] (triple-quoted or not; raw: no escapes).
func skipString(src string, i int, raw bool) int {
	q := src[i]
	delim := string(q)
	if strings.HasPrefix(src[i:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	for j := i + len(delim); j < len(src); j++ {
		if src[j] == '\\' && !raw {
			j++
			continue
		}
		if strings.HasPrefix(src[j:], delim) {
			return j + len(delim)
		}
	}
	return len(src)
}
