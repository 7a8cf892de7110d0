// Package redact scrubs secret values out of everything Starflow writes
// (SPEC §4): each resolved secret value, and its common encodings (base64
// standard and URL alphabets, padded and not; URL query and path escaping;
// JSON string escaping), is replaced by "***" wherever it appears — also
// when some of its characters are JSON- or percent-escaped and others not
// (`\u0073ecret`, `s%65cret`, escaped twice): see escaped.go.
//
// Scrub whole text before cutting it: a cut through a secret leaves a
// part that no longer matches.
//
// Import rule: standard library and internal/jsonvalue only.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/starflow/starflow/internal/jsonvalue"
)

// Mask replaces a secret.
const Mask = "***"

// Redactor scrubs a fixed set of secret values. The nil *Redactor scrubs
// nothing. It is safe for concurrent use.
type Redactor struct {
	r     *strings.Replacer
	forms []string // every form replaced, longest first
}

// New returns a Redactor for the given secret values. Empty values are
// ignored.
func New(values ...string) *Redactor {
	seen := map[string]bool{}
	var forms []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			forms = append(forms, s)
		}
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		add(v)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			add(enc.EncodeToString([]byte(v)))
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
		if j, err := json.Marshal(v); err == nil {
			add(string(j[1 : len(j)-1])) // HTML-escaped, as encoding/json writes
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			j := strings.TrimSpace(b.String())
			add(j[1 : len(j)-1])
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// Longest first, so that an encoding containing the raw value is
	// replaced whole.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), forms: forms}
}

// String scrubs s: every form of every secret, plain or with escaped
// characters, becomes Mask.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.scrubEscaped(r.r.Replace(s))
}

// Value scrubs every string (and map key) inside a JSON-like value,
// returning a new value; v is not modified.
func (r *Redactor) Value(v any) any {
	if r == nil {
		return v
	}
	out, _ := r.value(v)
	return out
}

// value scrubs v copy-on-write: a list or map is copied only when
// something inside it changes (a large step output with nothing to scrub
// is not duplicated), and changed reports whether anything did.
func (r *Redactor) value(v any) (out any, changed bool) {
	switch x := v.(type) {
	case string:
		s := r.String(x)
		return s, s != x
	case []any:
		var cp []any
		for i, e := range x {
			ne, ch := r.value(e)
			if ch && cp == nil {
				cp = make([]any, len(x))
				copy(cp, x[:i])
			}
			if cp != nil {
				cp[i] = ne
			}
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	case map[string]any:
		var cp map[string]any
		for k, e := range x {
			nk := r.String(k)
			ne, ch := r.value(e)
			if (ch || nk != k) && cp == nil {
				cp = make(map[string]any, len(x))
				for k2, e2 := range x {
					cp[k2] = e2
				}
			}
			if cp != nil {
				if nk != k {
					delete(cp, k)
				}
				cp[nk] = ne
			}
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	default:
		return v, false
	}
}

// JSON marshals v after scrubbing it. A value that does not marshal yields
// an error.
func (r *Redactor) JSON(v any) (json.RawMessage, error) {
	b, err := jsonvalue.Encode(r.Value(v))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Error returns err's message scrubbed.
func (r *Redactor) Error(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}
