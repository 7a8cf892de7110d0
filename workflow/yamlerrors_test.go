package workflow

import (
	"errors"
	"strings"
	"testing"
)

// TestYAMLSyntaxPositions: a YAML syntax error names the line counted
// from 1 whichever part of the YAML library found it (its parser counts
// from 0: an error on line 4 was reported on line 3), line 1 when the
// library leaves the line out, and a column only where it is certain: a
// Markdown fence, a control character. No error prints a column 0.
func TestYAMLSyntaxPositions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		line, col int
		frag      string
	}{
		{"unclosed flow sequence", "name: a\nsteps:\n  - id: x\n    pass: [1, 2\n", 4, 0, "did not find expected ',' or ']'"},
		{"misindented key", "name: a\nsteps:\n  - id: x\n    pass: 1\n   bad: 2\n", 3, 0, "did not find expected '-' indicator"},
		{"unclosed quote", "name: a\nsteps:\n  - id: x\n    pass: \"abc\n", 4, 0, "found unexpected end of stream"},
		{"mapping value on line 1", "name: a: b\nsteps: []\n", 1, 0, "mapping values are not allowed in this context"},
		{"tab indentation", "name: a\n\tsteps: []\n", 2, 0, "found a tab character"},
		{"pasted fence", "```yaml\nname: a\nsteps:\n  - id: x\n    pass: 1\n```\n", 1, 1, "a Markdown code fence (```)"},
		{"closing fence left", "name: a\nsteps:\n  - id: x\n    pass: 1\n  ```\n", 5, 3, "a Markdown code fence (```)"},
		{"control character", "name: a\nsteps:\n  - id: x\n    pass: \"a\x01b\"\n", 4, 13, "control character U+0001 is not allowed"},
		{"backquote", "name: `a`\nsteps: []\n", 1, 0, "found character that cannot start any token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(c.src), testOpts)
			var errs *Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("want a syntax error, got %v", err)
			}
			e := (*errs)[0]
			if e.Line != c.line || e.Column != c.col || !strings.Contains(e.Msg, c.frag) || !strings.HasPrefix(e.Msg, "syntax error: ") {
				t.Errorf("got %d:%d %q, want %d:%d with %q", e.Line, e.Column, e.Msg, c.line, c.col, c.frag)
			}
			if strings.Contains(e.Error(), ":0:") || strings.HasPrefix(e.Error(), "t.yaml: ") {
				t.Errorf("printed as %q", e.Error())
			}
		})
	}
}

// TestYAMLProblemsClassified: every problem of the library's parser is in
// yamlParserProblems, and the scanner's read as scanner problems, so each
// line is counted right (the lists come from go.yaml.in/yaml/v3 v3.0.6's
// parserc.go and scannerc.go; a new library version with new problems
// fails here until they are sorted).
func TestYAMLProblemsClassified(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"did not find expected ',' or ']'", "did not find expected key", "did not find expected node content", "found undefined tag handle"} {
		if !yamlParserProblems[p] {
			t.Errorf("parser problem %q not classified", p)
		}
	}
	for _, p := range []string{"mapping values are not allowed in this context", "found character that cannot start any token",
		"could not find expected ':'", "did not find expected whitespace or line break", "block sequence entries are not allowed in this context",
		"found unexpected end of stream", "exceeded max depth of 10000"} {
		if yamlParserProblems[p] || !scannerProblem(p) {
			t.Errorf("scanner problem %q not classified", p)
		}
	}
}
