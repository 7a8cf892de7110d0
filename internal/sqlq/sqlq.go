// Package sqlq loads named SQL queries from an embedded .sql file: each
// query starts at a line "-- name: NAME" and runs to the next such line.
// Comment lines inside a block are kept (SQL ignores them).
//
// Import rule: standard library only.
package sqlq

import (
	"fmt"
	"strings"
)

// Parse splits text into named queries. It returns an error for a
// duplicate or empty name.
func Parse(text string) (map[string]string, error) {
	out := map[string]string{}
	var name string
	var b strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("sqlq: query %q defined twice", name)
		}
		out[name] = strings.TrimSpace(b.String())
		b.Reset()
		return nil
	}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.TrimSpace(rest)
			if name == "" {
				return nil, fmt.Errorf("sqlq: empty query name")
			}
			continue
		}
		if name != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// MustParse is Parse for embedded files known at build time; it panics on
// a malformed file (a programming error caught by any test).
func MustParse(text string) map[string]string {
	q, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return q
}

// MustParseWith is MustParse with every marker /*NAME*/ of markers (keys
// without the comment delimiters) replaced by its text in every query.
func MustParseWith(text string, markers map[string]string) map[string]string {
	q := MustParse(text)
	var pairs []string
	for name, with := range markers {
		pairs = append(pairs, "/*"+name+"*/", with)
	}
	r := strings.NewReplacer(pairs...)
	for name, s := range q {
		q[name] = r.Replace(s)
	}
	return q
}
