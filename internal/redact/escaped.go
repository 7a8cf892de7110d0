package redact

import (
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Escaped forms. A service that echoes a secret may escape any of its
// characters, and only some: `\u0073ecret`, `s%65cret`, `\\u0073ecret`
// (escaped twice). No list of encoded forms covers every mix, so String
// also looks at the text decoded — JSON string escapes, then percent
// escapes, then each again (four views at most, each decoded from the
// one before) — finds every form of every secret in each view, and masks
// the raw text each occurrence was decoded from, whole escapes included.

// decoder decodes the escape at s[i] (s[i] is its trigger byte): token
// appends the decoded bytes to dst and returns the escape's raw length. A
// byte that starts no valid escape decodes to itself (length 1).
type decoder struct {
	trigger byte
	token   func(dst []byte, s string, i int) ([]byte, int)
}

var (
	jsonEscapes    = decoder{'\\', jsonToken}
	percentEscapes = decoder{'%', percentToken}
	// views is the order in which decoded views are made: JSON inside
	// URL-encoding inside JSON, and the other way round, are covered.
	views = []decoder{jsonEscapes, percentEscapes, jsonEscapes, percentEscapes}
)

// maxViewBytes bounds the text looked at in decoded views (bytes); longer
// text gets only the plain forms' replacement. Response bodies are
// bounded far below it (steps.MaxResponseBytes).
const maxViewBytes = 64 << 20

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// hex4 reads four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for k := 0; k < 4; k++ {
		v, ok := hexVal(s[i+k])
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// jsonToken decodes a JSON string escape: \" \\ \/ \b \f \n \r \t, \uXXXX
// and surrogate pairs \uD83D\uDE00 (a lone surrogate decodes to U+FFFD,
// as encoding/json does).
func jsonToken(dst []byte, s string, i int) ([]byte, int) {
	if i+1 >= len(s) {
		return append(dst, s[i]), 1
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return append(dst, c), 2
	case 'b':
		return append(dst, '\b'), 2
	case 'f':
		return append(dst, '\f'), 2
	case 'n':
		return append(dst, '\n'), 2
	case 'r':
		return append(dst, '\r'), 2
	case 't':
		return append(dst, '\t'), 2
	case 'u':
		r, ok := hex4(s, i+2)
		if !ok {
			return append(dst, s[i]), 1
		}
		if utf16.IsSurrogate(r) {
			if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if r2, ok := hex4(s, i+8); ok {
					if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
						return utf8.AppendRune(dst, p), 12
					}
				}
			}
			return utf8.AppendRune(dst, utf8.RuneError), 6
		}
		return utf8.AppendRune(dst, r), 6
	}
	return append(dst, s[i]), 1
}

// percentToken decodes %XX.
func percentToken(dst []byte, s string, i int) ([]byte, int) {
	if i+2 < len(s) {
		if h, ok := hexVal(s[i+1]); ok {
			if l, ok := hexVal(s[i+2]); ok {
				return append(dst, h<<4|l), 3
			}
		}
	}
	return append(dst, s[i]), 1
}

// decode returns s with every escape of d decoded, and whether anything
// changed.
func (d decoder) decode(s string) (string, bool) {
	if strings.IndexByte(s, d.trigger) < 0 {
		return s, false
	}
	b := make([]byte, 0, len(s))
	changed := false
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], d.trigger)
		if j < 0 {
			b = append(b, s[i:]...)
			break
		}
		b = append(b, s[i:i+j]...)
		i += j
		var n int
		b, n = d.token(b, s, i)
		changed = changed || n != 1
		i += n
	}
	if !changed {
		return s, false
	}
	return string(b), true
}

// span is a half-open byte range.
type span struct{ start, end int }

// mapBack maps spans of d.decode(s) back to spans of s: a span starts
// where the escape producing its first byte starts and ends where the
// escape producing its last byte ends.
func (d decoder) mapBack(s string, spans []span) []span {
	type query struct {
		pos   int // decoded offset of the byte asked about
		end   bool
		index int
	}
	qs := make([]query, 0, 2*len(spans))
	for i, sp := range spans {
		qs = append(qs, query{sp.start, false, i}, query{sp.end - 1, true, i})
	}
	sort.Slice(qs, func(a, b int) bool { return qs[a].pos < qs[b].pos })
	out := make([]span, len(spans))
	answer := func(q query, rawStart, rawEnd int) {
		if q.end {
			out[q.index].end = rawEnd
		} else {
			out[q.index].start = rawStart
		}
	}
	raw, dec, k := 0, 0, 0
	var piece []byte
	for raw < len(s) && k < len(qs) {
		// A run of plain bytes maps one to one.
		j := strings.IndexByte(s[raw:], d.trigger)
		if j < 0 {
			j = len(s) - raw
		}
		for k < len(qs) && qs[k].pos < dec+j {
			r := raw + qs[k].pos - dec
			answer(qs[k], r, r+1)
			k++
		}
		raw, dec = raw+j, dec+j
		if raw >= len(s) {
			break
		}
		var n int
		piece, n = d.token(piece[:0], s, raw)
		for k < len(qs) && qs[k].pos < dec+len(piece) {
			answer(qs[k], raw, raw+n)
			k++
		}
		raw, dec = raw+n, dec+len(piece)
	}
	return out
}

// scrubEscaped masks the secrets' forms found in decoded views of s.
func (r *Redactor) scrubEscaped(s string) string {
	if len(s) > maxViewBytes || !strings.ContainsAny(s, `\%`) {
		return s
	}
	type view struct {
		in  string  // the text this view was decoded from
		dec decoder // how
	}
	var chain []view
	var found []span // in s
	text := s
	for _, d := range views {
		out, changed := d.decode(text)
		if !changed {
			continue
		}
		chain = append(chain, view{text, d})
		text = out
		var hits []span
		for _, f := range r.forms {
			for i := 0; ; {
				j := strings.Index(text[i:], f)
				if j < 0 {
					break
				}
				hits = append(hits, span{i + j, i + j + len(f)})
				i += j + len(f)
			}
		}
		if len(hits) == 0 {
			continue
		}
		for k := len(chain) - 1; k >= 0; k-- {
			hits = chain[k].dec.mapBack(chain[k].in, hits)
		}
		found = append(found, hits...)
	}
	if len(found) == 0 {
		return s
	}
	sort.Slice(found, func(a, b int) bool { return found[a].start < found[b].start })
	var b strings.Builder
	at := 0
	for i := 0; i < len(found); {
		sp := found[i]
		for i++; i < len(found) && found[i].start <= sp.end; i++ {
			sp.end = max(sp.end, found[i].end)
		}
		b.WriteString(s[at:sp.start])
		b.WriteString(Mask)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}
