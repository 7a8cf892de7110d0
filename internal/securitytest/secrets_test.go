package securitytest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Issue 10 item 5: no fragment of a secret (8 bytes or more) is stored,
// whatever a hostile service does with it: echo it back with some or all
// of its characters JSON-escaped (\u0068…), percent-escaped, escaped
// twice, in a JSON or a text body or a header, or in a long error body
// that the engine cuts to a snippet (through the secret, before the fix).

// escapeJSON writes every character of s as \u00XX.
func escapeJSON(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

// escapeHalf JSON-escapes every other character of s.
func escapeHalf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `\u%04X`, s[i])
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// escapePercent percent-escapes every third character of s.
func escapePercent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i%3 == 1 {
			fmt.Fprintf(&b, "%%%02x", s[i])
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// hostileService echoes the secret it is sent in every escaped form, and
// fails with long bodies that carry it just past the snippet's cut.
func hostileService(t *testing.T, secret string) *egressServer {
	t.Helper()
	filler := func(n int) string { return strings.Repeat("x", n) }
	// A JSON document with the secret escaped in several ways; "double" is
	// a JSON string holding JSON, so its escapes are escaped once more.
	doc := `{"all":"` + escapeJSON(secret) + `","half":"` + escapeHalf(secret) + `","pct":"` + escapePercent(secret) +
		`","double":"{\"inner\":\"` + strings.ReplaceAll(escapeHalf(secret), `\`, `\\`) + `\"}","raw":"` + secret + `"}`
	return newEgressServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo-json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, doc)
		case "/echo-text":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "you sent "+doc)
		case "/echo-headers":
			w.Header().Set("X-Echo-All", escapeJSON(secret))
			w.Header().Set("X-Echo-Pct", escapePercent(secret))
			w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
			_, _ = io.WriteString(w, "ok")
		case "/fail-plain": // the secret from byte 190: a 200-byte cut goes through it
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, filler(190)+secret+filler(400))
		case "/fail-escaped":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, filler(150)+escapeJSON(secret)+filler(400))
		case "/fail-retry": // retried: node_retry events carry the snippet too
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, filler(180)+escapeHalf(secret)+filler(400))
		case "/fail-final": // ends the run: workflow_runs.error
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"`+filler(170)+escapePercent(secret)+filler(300)+`"}`)
		default:
			http.NotFound(w, r)
		}
	})
}

const hostileDef = `name: hostile-echo
max_attempts: 1
secrets: [HOSTILE_TOKEN]
steps:
  - id: json_echo
    service_call:
      url: "${{ input.base + '/echo-json' }}"
      headers: {Authorization: "${{ 'Bearer ' + secrets.HOSTILE_TOKEN }}"}
  - id: text_echo
    service_call: {url: "${{ input.base + '/echo-text' }}", method: POST, body: {token: "${{ secrets.HOSTILE_TOKEN }}"}}
  - id: header_echo
    service_call:
      url: "${{ input.base + '/echo-headers' }}"
      headers: {Authorization: "${{ 'Bearer ' + secrets.HOSTILE_TOKEN }}"}
  - id: keep
    context_set:
      copied: "${{ steps.json_echo.output.body }}"
      text: "${{ steps.text_echo.output.body }}"
      headers: "${{ steps.header_echo.output.headers }}"
  - id: plain_guard
    try:
      steps:
        - id: fail_plain
          service_call: {url: "${{ input.base + '/fail-plain' }}"}
      catch:
        - id: plain_caught
          context_set: {plain_error: "${{ error.message }}"}
  - id: escaped_guard
    try:
      steps:
        - id: fail_escaped
          service_call: {url: "${{ input.base + '/fail-escaped' }}"}
      catch:
        - id: escaped_caught
          context_set: {escaped_error: "${{ error.message }}"}
  - id: retry_guard
    try:
      steps:
        - id: fail_retry
          service_call: {url: "${{ input.base + '/fail-retry' }}"}
          retry_policy: {max_attempts: 2, initial_interval: 1ms}
      catch:
        - id: retry_caught
          context_set: {retry_error: "${{ error.message }}"}
  - id: final
    service_call: {url: "${{ input.base + '/fail-final' }}"}
`

var (
	jsonEscape    = regexp.MustCompile(`\\u([0-9a-fA-F]{4})|\\(["\\/])`)
	percentEscape = regexp.MustCompile(`%([0-9a-fA-F]{2})`)
)

// decodedViews is s with JSON and percent escapes decoded, one layer, two
// layers and three (what a reader of the table could do).
func decodedViews(s string) []string {
	views := []string{s}
	for range 3 {
		s = jsonEscape.ReplaceAllStringFunc(s, func(m string) string {
			if m[1] == 'u' {
				n, _ := strconv.ParseUint(m[2:], 16, 32)
				return string(rune(n))
			}
			return m[1:]
		})
		s = percentEscape.ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.ParseUint(m[1:], 16, 8)
			return string([]byte{byte(n)})
		})
		views = append(views, s)
	}
	return views
}

// secretFragments are the pieces a stored text must not contain: every
// 8-byte substring of the secret and of its base64 forms.
func secretFragments(secret string) []string {
	var out []string
	for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))} {
		for i := 0; i+8 <= len(form); i++ {
			out = append(out, form[i:i+8])
		}
	}
	return out
}

// leaks returns the fragments found in any decoded view of s.
func leaks(s string, fragments []string) []string {
	var found []string
	for _, v := range decodedViews(s) {
		for _, f := range fragments {
			if strings.Contains(v, f) {
				found = append(found, f)
			}
		}
		if len(found) > 0 {
			return found
		}
	}
	return nil
}

func TestNoSecretFragmentStored(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	secret := hex.EncodeToString(buf) // 48 random bytes: no fragment of it occurs by chance
	svc := hostileService(t, secret)
	r := runEgress(t, hostileDef, map[string]any{"base": svc.URL}, []string{"HOSTILE_TOKEN=" + secret})
	if r.code != 1 {
		t.Fatalf("want the run to fail at step final (exit 1):\n%s", r.cliResult)
	}
	// The run went where the test says: every step ran, the service got
	// the secret, the errors were caught and the last one ended the run.
	for id, want := range map[string]string{"json_echo": "succeeded", "text_echo": "succeeded", "header_echo": "succeeded", "keep": "succeeded",
		"fail_plain": "failed", "plain_caught": "succeeded", "fail_escaped": "failed", "escaped_caught": "succeeded",
		"fail_retry": "failed", "retry_caught": "succeeded", "final": "failed"} {
		if s := r.step(t, id); s.status != want {
			t.Fatalf("step %s %s (want %s): %q\n%s", id, s.status, want, s.err, r.cliResult)
		}
	}
	if s := r.step(t, "fail_retry"); s.tries != 2 {
		t.Fatalf("fail_retry tried %d times, want 2", s.tries)
	}
	got := svc.requests()
	if len(got) == 0 || got[0].Get("Authorization") != "Bearer "+secret {
		t.Fatal("the hostile service never got the secret")
	}
	// The snippets were kept (scrubbed), not dropped: the cut is after
	// the mask.
	if s := r.step(t, "fail_plain"); !strings.Contains(s.err, "answered 400 Bad Request: xxx") || !strings.Contains(s.err, "***") {
		t.Fatalf("fail_plain error %q: want the scrubbed snippet", s.err)
	}

	fragments := secretFragments(secret)
	cells := sqliteCells(t, r.db)
	masked := 0
	for _, c := range cells {
		if found := leaks(string(c.value), fragments); len(found) > 0 {
			t.Errorf("%s holds secret fragments %q: %s", c.where, found, c.value)
		}
		if bytes.Contains(c.value, []byte("***")) {
			masked++
		}
	}
	if masked < 10 {
		t.Fatalf("only %d cells hold a mask: the hostile echoes did not reach the tables", masked)
	}
	if found := leaks(r.stdout+r.stderr, fragments); len(found) > 0 {
		t.Errorf("the command printed secret fragments %q:\n%s", found, r.cliResult)
	}
}
