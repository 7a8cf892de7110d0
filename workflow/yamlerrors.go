package workflow

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The YAML library (go.yaml.in/yaml/v3) reports a syntax error as text
// only: "yaml: line N: PROBLEM", or "yaml: PROBLEM" when N would be 0. N
// is the line of the construct the parser was reading when it has one
// (a flow sequence, a block mapping, a quoted scalar), else the line of
// the problem; it gives no column. It counts N from 0 for the parser's
// problems and from 1 for the scanner's, so the same mistake on line 4 can
// be "line 3" or "line 4". syntaxError turns the text into a position:
// the line counted from 1, whichever part of the library found it, and a
// column only where it is known for certain (never a column 0 printed as
// if it were real).

var (
	yamlLineErr   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	yamlAnchorErr = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)
)

// yamlParserProblems are the problems the library's parser reports
// (parserc.go): their line is counted from 0. Every other problem with a
// line comes from its scanner and is counted from 1.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
	"unknown problem parsing YAML content":   true,
}

// yamlScannerProblemPrefixes start the scanner's problems that the
// library reports without a line when it is the first one (line 0 counted
// from 0 is omitted): a problem without a line is then on line 1.
var yamlScannerProblemPrefixes = []string{
	"found ", "did not find ", "could not find ", "mapping ", "block sequence ", "exceeded max depth",
}

func syntaxError(errs *errorList, text []byte, err error) {
	msg := err.Error()
	if m := yamlAnchorErr.FindStringSubmatch(msg); m != nil {
		// The parser does not say where; the first use of the name does.
		if i := bytes.Index(text, []byte("*"+m[1])); i >= 0 {
			errs.add(posAt(text, i), err, "unknown anchor %q", m[1])
			return
		}
	}
	problem := strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if m := yamlLineErr.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		problem = m[2]
		if yamlParserProblems[problem] {
			line++
		}
	} else if yamlParserProblems[problem] || scannerProblem(problem) {
		line = 1 // the library leaves out line 0 (the parser's) or 1
	}
	switch {
	case problem == "control characters are not allowed":
		// The reader's problem carries no position; the character does.
		if i := firstControl(text); i >= 0 {
			r, _ := utf8.DecodeRune(text[i:])
			errs.add(posAt(text, i), err, "syntax error: control character %U is not allowed in YAML (write it as an escape inside a double-quoted string)", r)
			return
		}
	case problem == "found character that cannot start any token" && line > 0:
		if col := fenceAt(text, line); col > 0 {
			errs.add(Pos{Line: line, Column: col}, err, "syntax error: a Markdown code fence (```): the definition is the YAML between the fences, without them")
			return
		}
	}
	errs.add(Pos{Line: line}, err, "syntax error: %s", problem)
}

// scannerProblem reports whether problem reads as one of the scanner's.
func scannerProblem(problem string) bool {
	for _, p := range yamlScannerProblemPrefixes {
		if strings.HasPrefix(problem, p) {
			return true
		}
	}
	return false
}

// fenceAt is the column of a Markdown code fence (```) that starts line
// (1-based) of text after spaces only, 0 when the line has none.
func fenceAt(text []byte, line int) int {
	lines := bytes.Split(text, []byte("\n"))
	if line < 1 || line > len(lines) {
		return 0
	}
	l := lines[line-1]
	trimmed := bytes.TrimLeft(l, " ")
	if !bytes.HasPrefix(trimmed, []byte("```")) {
		return 0
	}
	return len(l) - len(trimmed) + 1
}

// firstControl is the byte offset of the first character the YAML reader
// refuses (YAML 1.2's printable set: tab, line feed, carriage return,
// U+0020–U+007E, U+0085, U+00A0–U+D7FF, U+E000–U+FFFD, U+10000 and up),
// -1 when there is none.
func firstControl(text []byte) int {
	for i, r := range string(text) {
		switch {
		case r == '\t', r == '\n', r == '\r', r >= 0x20 && r <= 0x7e, r == 0x85,
			r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		default:
			return i
		}
	}
	return -1
}
