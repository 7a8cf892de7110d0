package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/starflow/starflow/internal/expr"
)

// ParseOptions configures Parse.
type ParseOptions struct {
	// IsStepType reports whether name is a registered custom step type
	// (beyond the built-ins service_call, context_set, fail). nil = no
	// custom types.
	IsStepType func(name string) bool
	// Expr compiles expressions; nil = expr.Default().
	Expr *expr.Env
	// Limits caps the definition: its source size (checked first, before
	// anything is parsed), the nesting of constructs, a for_each's
	// concurrency and a repeat_until's max_iterations. Zero fields take
	// their defaults; NoLimits() lifts them all.
	Limits Limits
	// Stored parses a definition that was validated when it was applied
	// (a stored revision a run is pinned to): the refusals that are not
	// about the format itself — names out of scope, retry_policy where it
	// has no effect — are not applied again, so a revision applied before
	// they existed still runs. Pair it with NoLimits().
	Stored bool
}

// Limits of a definition's shape.
const (
	// MaxNodes bounds the number of values a definition may expand to,
	// aliases expanded (the "billion laughs" defence).
	MaxNodes = 100_000
	// MaxDepth bounds how deep values nest.
	MaxDepth = 500
	// MaxKeyLength bounds a mapping key as JSON writes it, quotes and
	// escapes included: YAML reads no longer implicit key, and the
	// canonical form must read back.
	MaxKeyLength = 1024
)

// Parse parses a definition written in YAML or JSON (JSON is read by the
// same parser, so both formats give positions) and validates it. filename
// is used in error messages and as Definition.Source. When the definition
// is invalid the error is an *Errors listing every problem found.
//
// Numbers without a fraction or exponent decode as int64, others as
// float64; YAML anchors, aliases and merge keys (<<) are expanded.
func Parse(filename string, data []byte, opts ParseOptions) (*Definition, error) {
	file := filename
	if file == "" {
		file = "<input>"
	}
	if opts.Expr == nil {
		opts.Expr = expr.Default()
	}
	opts.Limits = opts.Limits.WithDefaults()
	if err := opts.Limits.CheckSource(len(data)); err != nil {
		return nil, &Errors{{File: file, Msg: err.Error(), Err: err}}
	}
	src := newSource(data)
	errs := &errorList{file: file, orig: src.orig}
	root := readYAML(src, errs)
	if root == nil {
		return nil, errs.result()
	}
	d := &decoder{errs: errs, src: src, opts: opts, limits: opts.Limits}
	def := d.definition(root)
	if err := errs.result(); err != nil {
		return nil, err
	}
	def.Source = filename
	return def, nil
}

// ParseFile reads and parses the definition in the file at path. A file
// over opts.Limits.SourceBytes is refused without being read whole.
func ParseFile(path string, opts ParseOptions) (*Definition, error) {
	data, err := ReadSource(path, opts.Limits)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// ReadSource reads the definition source in the file at path, reading no
// more than l.SourceBytes + 1 bytes: a larger file is refused with an
// *Errors holding the *LimitError, as Parse would refuse it.
func ReadSource(path string, l Limits) ([]byte, error) {
	l = l.WithDefaults()
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if l.SourceBytes >= 0 {
		r = io.LimitReader(f, l.SourceBytes+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := l.CheckSource(len(data)); err != nil {
		if fi, serr := f.Stat(); serr == nil && fi.Mode().IsRegular() {
			err = limitError(LimitSourceBytes, fi.Size(), l.SourceBytes, "the definition source (%d bytes) exceeds", fi.Size())
		}
		return nil, &Errors{{File: path, Msg: err.Error(), Err: err}}
	}
	return data, nil
}

// source is the text handed to the YAML parser: the input, with the JSON
// escapes YAML lacks rewritten when the input is JSON (see jsonCompat).
type source struct {
	text   []byte
	shifts []shift
	lines  []string       // split on demand
	runes  map[int][]rune // lines decoded on demand, by number
}

// shift records that on line, from column col of the rewritten text on,
// columns of the original are delta larger.
type shift struct{ line, col, delta int }

func newSource(data []byte) *source {
	text, shifts := jsonCompat(data)
	return &source{text: text, shifts: shifts}
}

// orig maps a position in the rewritten text to the original.
func (s *source) orig(p Pos) Pos {
	for _, sh := range s.shifts {
		if sh.line == p.Line && p.Column >= sh.col {
			p.Column += sh.delta
		}
	}
	return p
}

// line returns line n (1-based) of the rewritten text, as characters
// (columns count characters).
func (s *source) line(n int) []rune {
	if r, ok := s.runes[n]; ok {
		return r
	}
	if s.lines == nil {
		s.lines = strings.Split(string(s.text), "\n")
		s.runes = map[int][]rune{}
	}
	var r []rune
	if n >= 1 && n <= len(s.lines) {
		r = []rune(strings.TrimSuffix(s.lines[n-1], "\r"))
	}
	s.runes[n] = r
	return r
}

// jsonCompat rewrites, in an input that looks like JSON (its first
// character is '{' or '['), what JSON allows and YAML does not: tabs
// outside strings (to spaces, same columns), the escape \/ (to /) and
// UTF-16 surrogate pairs \uD83D\uDE00 (to \U0001F600). A lone surrogate
// becomes \uFFFD, as encoding/json decodes it. Other inputs are returned
// as they are.
func jsonCompat(data []byte) ([]byte, []shift) {
	bom := 0
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		bom = 3
	}
	i := bom
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	if i == len(data) || (data[i] != '{' && data[i] != '[') {
		return data, nil
	}
	if !bytes.ContainsAny(data, "\t\\") {
		return data, nil
	}
	out := make([]byte, 0, len(data))
	out = append(out, data[:bom]...)
	var shifts []shift
	line, col := 1, 1 // position in out
	inString := false
	for j := bom; j < len(data); {
		c := data[j]
		switch {
		case c == '\n':
			out = append(out, c)
			line, col = line+1, 1
			j++
			continue
		case !inString && c == '\t':
			out = append(out, ' ')
		case c == '"':
			inString = !inString
			out = append(out, c)
		case inString && c == '\\' && j+1 < len(data):
			n, rep := jsonEscape(data[j:])
			out = append(out, rep...)
			col += utf8.RuneCount(rep)
			if d := n - len(rep); d > 0 {
				shifts = append(shifts, shift{line: line, col: col, delta: d})
			}
			j += n
			continue
		default:
			_, size := utf8.DecodeRune(data[j:])
			out = append(out, data[j:j+size]...)
			j += size
			col++
			continue
		}
		j++
		col++
	}
	return out, shifts
}

// jsonEscape reads the escape at the start of s (s[0] == '\\') and returns
// how many bytes it spans and what to write instead.
func jsonEscape(s []byte) (int, []byte) {
	switch s[1] {
	case '/':
		return 2, []byte("/")
	case 'u':
		r, ok := hex4(s[2:])
		if !ok || r < 0xD800 || r > 0xDFFF {
			return 2, s[:2]
		}
		if r <= 0xDBFF && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if lo, ok := hex4(s[8:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				cp := 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				return 12, fmt.Appendf(nil, "\\U%08X", cp)
			}
		}
		return 6, []byte(`\uFFFD`)
	}
	return 2, s[:2]
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s[:4]), 16, 32)
	return rune(v), err == nil
}

// readYAML parses the single YAML document in src into a value tree,
// reporting syntax errors. It returns nil when nothing can be decoded.
func readYAML(src *source, errs *errorList) (root *vnode) {
	if !utf8.Valid(src.text) {
		errs.add(invalidUTF8Pos(src.text), nil, "the definition is not valid UTF-8")
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			errs.add(Pos{}, nil, "YAML parser failure: %v", r)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src.text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			errs.add(Pos{Line: 1, Column: 1}, nil, "the definition is empty")
		} else {
			syntaxError(errs, src.text, err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs.add(Pos{Line: extra.Line, Column: extra.Column}, nil, "a definition is one YAML document; found another")
		return nil
	} else if !errors.Is(err, io.EOF) {
		syntaxError(errs, src.text, err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		errs.add(Pos{Line: 1, Column: 1}, nil, "the definition is empty")
		return nil
	}
	r := &reader{errs: errs, active: map[*yaml.Node]bool{}}
	root = r.value(doc.Content[0])
	if r.tooBig {
		return nil
	}
	return root
}

// posAt returns the position of byte offset i of text.
func posAt(text []byte, i int) Pos {
	line := bytes.Count(text[:i], []byte("\n")) + 1
	start := bytes.LastIndexByte(text[:i], '\n') + 1
	return Pos{Line: line, Column: utf8.RuneCount(text[start:i]) + 1}
}

func invalidUTF8Pos(b []byte) Pos {
	p := Pos{Line: 1, Column: 1}
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return p
		}
		if r == '\n' {
			p.Line, p.Column = p.Line+1, 1
		} else {
			p.Column++
		}
		b = b[size:]
	}
	return p
}

// vkind is the JSON type of a decoded value.
type vkind uint8

const (
	vInvalid vkind = iota // could not be decoded; the problem is reported
	vNull
	vBool
	vInt
	vFloat
	vString
	vList
	vMap
)

// vnode is a decoded YAML/JSON value with its position (in the rewritten
// text; errorList maps it back).
type vnode struct {
	kind  vkind
	pos   Pos
	style yaml.Style // of a scalar, to place expression errors
	b     bool
	i     int64
	f     float64
	s     string
	items []*vnode
	pairs []vpair
}

// vpair is one key of a mapping.
type vpair struct {
	key    string
	keyPos Pos
	val    *vnode
}

// describe names n's type for messages ("a string").
func (n *vnode) describe() string {
	switch n.kind {
	case vNull:
		return "null"
	case vBool:
		return "a boolean"
	case vInt:
		return "an integer"
	case vFloat:
		return "a number"
	case vString:
		return "a string"
	case vList:
		return "a list"
	case vMap:
		return "a mapping"
	}
	return "invalid"
}

// value converts n to plain Go values: nil, bool, int64, float64, string,
// []any, map[string]any.
func (n *vnode) value() any {
	switch n.kind {
	case vBool:
		return n.b
	case vInt:
		return n.i
	case vFloat:
		return n.f
	case vString:
		return n.s
	case vList:
		out := make([]any, len(n.items))
		for i, x := range n.items {
			out[i] = x.value()
		}
		return out
	case vMap:
		out := make(map[string]any, len(n.pairs))
		for _, p := range n.pairs {
			out[p.key] = p.val.value()
		}
		return out
	}
	return nil
}

// reader converts a yaml.Node tree to vnodes, expanding aliases within
// the MaxNodes budget.
type reader struct {
	errs   *errorList
	nodes  int
	depth  int
	tooBig bool
	active map[*yaml.Node]bool // anchored nodes being expanded
}

var invalid = &vnode{kind: vInvalid}

func (r *reader) value(n *yaml.Node) *vnode {
	if r.tooBig {
		return invalid
	}
	r.nodes++
	pos := Pos{Line: n.Line, Column: n.Column}
	if r.nodes > MaxNodes {
		r.tooBig = true
		r.errs.add(pos, nil, "the definition has more than %d values (counting those YAML aliases repeat)", MaxNodes)
		return invalid
	}
	if r.depth >= MaxDepth {
		r.tooBig = true
		r.errs.add(pos, nil, "values nest more than %d levels deep", MaxDepth)
		return invalid
	}
	r.depth++
	defer func() { r.depth-- }()
	if n.Anchor != "" {
		if r.active[n] {
			r.errs.add(pos, nil, "alias refers to a value that contains it")
			return invalid
		}
		r.active[n] = true
		defer delete(r.active, n)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			r.errs.add(pos, nil, "unknown anchor %q", n.Value)
			return invalid
		}
		if r.active[n.Alias] {
			r.errs.add(pos, nil, "alias *%s refers to a value that contains it", n.Value)
			return invalid
		}
		return r.value(n.Alias)
	case yaml.ScalarNode:
		return r.scalar(n, pos)
	case yaml.SequenceNode:
		if t := n.ShortTag(); t != "!!seq" {
			r.errs.add(pos, nil, "unsupported YAML tag %s", t)
			return invalid
		}
		v := &vnode{kind: vList, pos: pos, items: make([]*vnode, 0, len(n.Content))}
		for _, c := range n.Content {
			v.items = append(v.items, r.value(c))
		}
		return v
	case yaml.MappingNode:
		return r.mapping(n, pos)
	}
	r.errs.add(pos, nil, "unexpected YAML node")
	return invalid
}

func (r *reader) mapping(n *yaml.Node, pos Pos) *vnode {
	if t := n.ShortTag(); t != "!!map" {
		r.errs.add(pos, nil, "unsupported YAML tag %s", t)
		return invalid
	}
	v := &vnode{kind: vMap, pos: pos}
	seen := map[string]Pos{}
	var merges []*vnode
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kpos := Pos{Line: k.Line, Column: k.Column}
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, r.value(val))
			continue
		}
		vv := r.value(val)
		t := k.ShortTag()
		if k.Kind != yaml.ScalarNode || (t != "!!str" && t != "!!timestamp") {
			r.errs.add(kpos, nil, "mapping keys must be strings")
			continue
		}
		if !utf8.ValidString(k.Value) {
			r.errs.add(kpos, nil, "key is not valid UTF-8")
			continue
		}
		if n := keyLength(k.Value); n > MaxKeyLength {
			r.errs.add(kpos, nil, "key is too long: %d characters as JSON writes it, the limit is %d", n, MaxKeyLength)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			r.errs.add(kpos, nil, "duplicate key %q (first at line %d)", k.Value, first.Line)
			continue
		}
		seen[k.Value] = kpos
		v.pairs = append(v.pairs, vpair{key: k.Value, keyPos: kpos, val: vv})
	}
	for _, m := range merges {
		srcs := []*vnode{m}
		if m.kind == vList {
			srcs = m.items
		}
		for _, s := range srcs {
			if s.kind == vInvalid {
				continue
			}
			if s.kind != vMap {
				r.errs.add(s.pos, nil, "the value of << must be a mapping or a list of mappings")
				continue
			}
			for _, p := range s.pairs {
				if _, dup := seen[p.key]; !dup {
					seen[p.key] = p.keyPos
					v.pairs = append(v.pairs, p)
				}
			}
		}
	}
	return v
}

// keyLength is the length in characters of key as the canonical form
// writes it.
func keyLength(key string) int {
	if len(key) < MaxKeyLength/6-2 {
		return len(key) + 2 // short enough whatever the escapes
	}
	b, _ := json.Marshal(key)
	return utf8.RuneCount(yamlSafe(b))
}

var digitsOnly = regexp.MustCompile(`^[-+]?[0-9_]+$`)

// plainNumber is YAML 1.2's float form (which covers JSON numbers), as the
// YAML library matches it after dropping underscores.
var plainNumber = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

func (r *reader) scalar(n *yaml.Node, pos Pos) *vnode {
	v := &vnode{pos: pos, style: n.Style}
	switch t := n.ShortTag(); t {
	case "!!str", "!!timestamp", "!!merge":
		if !utf8.ValidString(n.Value) {
			r.errs.add(pos, nil, "string is not valid UTF-8")
			return invalid
		}
		if t == "!!str" && n.Style == 0 && plainNumber.MatchString(strings.ReplaceAll(n.Value, "_", "")) {
			// An untagged plain scalar shaped like a number that the YAML
			// library left a string because it overflows a float64 (1e400,
			// or 400 digits): YAML 1.2 and JSON both say it is a number,
			// and it has no finite value.
			if digitsOnly.MatchString(n.Value) {
				r.errs.add(pos, nil, "integer %s is out of range (integers are 64-bit)", n.Value)
			} else {
				r.errs.add(pos, nil, "number %s is out of range: numbers must be finite 64-bit floats (at most ±1.8e308); quote it to mean a string", n.Value)
			}
			return invalid
		}
		v.kind, v.s = vString, n.Value
	case "!!null":
		v.kind = vNull
	case "!!bool":
		if err := n.Decode(&v.b); err != nil {
			r.errs.add(pos, nil, "%q is not a boolean", n.Value)
			return invalid
		}
		v.kind = vBool
	case "!!int":
		if err := n.Decode(&v.i); err != nil {
			if digitsOnly.MatchString(n.Value) {
				r.errs.add(pos, nil, "integer %s is out of range (integers are 64-bit)", n.Value)
			} else {
				r.errs.add(pos, nil, "%q is not an integer", n.Value)
			}
			return invalid
		}
		v.kind = vInt
	case "!!float":
		if digitsOnly.MatchString(n.Value) {
			r.errs.add(pos, nil, "integer %s is out of range (integers are 64-bit)", n.Value)
			return invalid
		}
		if err := n.Decode(&v.f); err != nil {
			r.errs.add(pos, nil, "%q is not a number", n.Value)
			return invalid
		}
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			r.errs.add(pos, nil, "numbers must be finite, not %s", n.Value)
			return invalid
		}
		v.kind = vFloat
	default:
		r.errs.add(pos, nil, "unsupported YAML tag %s", t)
		return invalid
	}
	return v
}
