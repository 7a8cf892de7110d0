package main

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text the CLI prints often comes from outside: a service's error body, a
// step's output, an event payload, a signal name or correlation key
// rendered from run input. Printed raw, `ESC[2J` clears the operator's
// screen, `ESC]0;…BEL` sets the window title, a CR returns to the start of
// the line so what follows overwrites "failed" with "ok" (decision 114).
// Every print of such text goes through termSafe (one field) or termText
// (a message of several lines); --json output through jsonSafe.

// termSafe returns s as one line fit for a terminal: every character a
// terminal could act on becomes a visible Go-style escape, so the text
// prints as what it is and cannot move the cursor, clear the screen, set
// the title, or hide or reorder what follows:
//
//   - C0 control characters (U+0000–U+001F: newline, CR and tab
//     included) and DEL: \n, \r, \t, \a, \b, \f, \v, else \x1b, \x7f;
//   - C1 control characters (U+0080–U+009F, which some terminals read as
//     CSI, OSC, …): \u009b;
//   - bidirectional formatting characters (U+061C, U+200E, U+200F,
//     U+202A–U+202E, U+2066–U+2069, which reorder the displayed text) and
//     the line and paragraph separators U+2028, U+2029: \u202e;
//   - bytes that are not UTF-8: \xff.
//
// Everything else, the backslash included, is kept, so text with nothing
// to escape (JSON, error messages) is returned unchanged and termSafe of
// termSafe is termSafe.
func termSafe(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			if e, ok := c0Escapes[r]; ok {
				b.WriteString(e)
			} else {
				fmt.Fprintf(&b, `\x%02x`, r)
			}
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// termText is termSafe for a message of several lines: each line is made
// safe and the newlines between them kept.
func termText(s string) string {
	if firstUnsafe(s) < 0 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termSafe(l)
	}
	return strings.Join(lines, "\n")
}

// jsonSafe makes JSON text (as encoding/json writes it) fit for a
// terminal: encoding/json already escapes C0 controls inside strings
// (\u001b) and U+2028/U+2029, but leaves C1 controls and bidirectional
// formatting characters as they are, and a json.RawMessage may carry bytes
// that are not UTF-8. Those can only sit inside strings in valid JSON, so
// each becomes a JSON escape there (\u009b; a byte that is not UTF-8
// becomes \ufffd, as encoding/json does for strings it encodes), and the
// result is the same JSON value.
func jsonSafe(data []byte) []byte {
	i := firstUnsafe(string(data))
	if i < 0 {
		return data
	}
	var b bytes.Buffer
	b.Grow(len(data) + 16)
	b.Write(data[:i])
	for i < len(data) {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r < 0x20 && r != '\n' && r != '\t' && r != '\r' || r == 0x7f || unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(data[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}

// c0Escapes are the short escapes of C0 controls (Go's and C's).
var c0Escapes = map[rune]string{
	'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`,
}

// firstUnsafe is the byte offset of the first character termSafe would
// escape, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports a non-ASCII character a terminal acts on or that
// reorders or breaks the displayed line (see termSafe).
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1 controls
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, // bidi marks
		r >= 0x202a && r <= 0x202e, // bidi embeddings and overrides
		r >= 0x2066 && r <= 0x2069, // bidi isolates
		r == 0x2028, r == 0x2029:   // line and paragraph separators
		return true
	}
	return false
}
