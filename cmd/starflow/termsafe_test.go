package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// hostileText is what a hostile service answers: clear the screen, turn
// red, print a fake verdict, set the window title (OSC … BEL), return to
// the start of the line and erase it, a C1 CSI (U+009B) and a
// right-to-left override (U+202E).
const hostileText = "\x1b[2J\x1b[31mFAKE: all good\x1b]0;pwned\a\r\x1b[Kstep ok \u009b31m \u202edeliaf"

// terminalBytes are the bytes no CLI output may carry once hostileText
// went through a run: ESC, BEL, CR, and the UTF-8 forms of U+009B and
// U+202E.
var terminalBytes = []string{"\x1b", "\a", "\r", "\u009b", "\u202e"}

// TestCLIEscapesTerminalControls: a service whose answers carry terminal
// control sequences — in an error body (the step fails) and in a body that
// becomes the run's output — cannot act on the operator's terminal through
// `run`, `runs show|ledger|events|list` (tables and --json): the text is
// shown, escaped, and --json still decodes to what the service sent.
func TestCLIEscapesTerminalControls(t *testing.T) {
	t.Parallel()
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = w.Write([]byte(hostileText))
	}))
	defer svc.Close()
	dir := t.TempDir()
	writeFile(t, dir, "fail.yaml", `name: ansi
steps:
  - id: a
    retry_policy: {max_attempts: 1}
    service_call: {url: "`+svc.URL+`/fail"}
`)
	writeFile(t, dir, "ok.yaml", `name: ansi-ok
steps:
  - id: fetch
    service_call: {url: "`+svc.URL+`/ok"}
  - id: keep
    context_set: {said: "${{ steps.fetch.output.body }}"}
output: "${{ steps.fetch.output.body }}"
`)
	var outputs []string
	runIDs := map[string]string{}
	for file, want := range map[string]int{"fail.yaml": 1, "ok.yaml": 0} {
		res := starflowCmd(t, dir, nil, "run", file, "--db", "a.db")
		if res.code != want {
			t.Fatalf("run %s: exit %d, want %d\n%s\n%s", file, res.code, want, res.stdout, res.stderr)
		}
		m := regexp.MustCompile(`run ([0-9a-f-]{36}) (failed|succeeded)`).FindStringSubmatch(res.stdout)
		if m == nil {
			t.Fatalf("run %s: no run id:\n%s", file, res.stdout)
		}
		runIDs[file] = m[1]
		// The text is shown, escaped: the operator sees what the service
		// sent (an error as text, the output as JSON).
		shown := map[string]string{"fail.yaml": `\x1b[2J\x1b[31mFAKE: all good\x1b]0;pwned\a`, "ok.yaml": `\u001b[2J\u001b[31mFAKE: all good\u001b]0;pwned\u0007\r`}[file]
		if !strings.Contains(res.stdout+res.stderr, shown) {
			t.Errorf("run %s: the escaped text is not shown:\n%s\n%s", file, res.stdout, res.stderr)
		}
		outputs = append(outputs, res.stdout, res.stderr)
	}
	var cmds [][]string
	for _, id := range runIDs {
		for _, sub := range []string{"show", "ledger", "events", "waits"} {
			cmds = append(cmds, []string{"runs", sub, id})
		}
	}
	cmds = append(cmds, []string{"runs", "list"})
	for _, args := range cmds {
		for _, format := range [][]string{nil, {"--json"}} {
			r := starflowCmd(t, dir, nil, append(append(args, "--db", "a.db"), format...)...)
			if r.code != 0 {
				t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
			}
			outputs = append(outputs, r.stdout, r.stderr)
			if format != nil && !json.Valid([]byte(r.stdout)) {
				t.Fatalf("%v --json is not JSON:\n%s", args, r.stdout)
			}
		}
	}
	for _, out := range outputs {
		for _, b := range terminalBytes {
			if i := strings.Index(out, b); i >= 0 {
				t.Fatalf("output holds %q at byte %d:\n%q", b, i, out)
			}
		}
	}
	// --json escapes, it does not alter: the run's output decodes to the
	// service's text.
	show := starflowCmd(t, dir, nil, "runs", "show", runIDs["ok.yaml"], "--db", "a.db", "--json")
	var run struct {
		Output string `json:"output"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &run); err != nil {
		t.Fatal(err)
	}
	if run.Output != hostileText {
		t.Fatalf("runs show --json output decodes to %q, want %q", run.Output, hostileText)
	}
}

func TestTermSafe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain text, {\"json\": \"\\u001b\"} and ünïcødé ✓", "plain text, {\"json\": \"\\u001b\"} and ünïcødé ✓"},
		{"\x1b[2J", `\x1b[2J`},
		{"title\x1b]0;x\a", `title\x1b]0;x\a`},
		{"a\r\nb\tc\x00d\x7f", `a\r\nb\tc\x00d\x7f`},
		{"csi \u009b31m nel \u0085", `csi \u009b31m nel \u0085`},
		{"rlo \u202eabc\u202c lri \u2066x\u2069 lrm \u200e alm \u061c ls \u2028", `rlo \u202eabc\u202c lri \u2066x\u2069 lrm \u200e alm \u061c ls \u2028`},
		{"bad \xff\xfe utf8 \xe2\x82", `bad \xff\xfe utf8 \xe2\x82`},
	} {
		got := termSafe(c.in)
		if got != c.want {
			t.Errorf("termSafe(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := termSafe(got); again != got {
			t.Errorf("termSafe is not idempotent on %q: %q", got, again)
		}
	}
	if got := termText("line one\x1b[2J\nline two\r"); got != "line one\\x1b[2J\nline two\\r" {
		t.Errorf("termText = %q", got)
	}
}

func TestJSONSafe(t *testing.T) {
	t.Parallel()
	in := []byte("{\n  \"a\": \"x\u009by\u202ez\xff\",\n\t\"b\": \"\\u001b\"\n}\n")
	got := jsonSafe(in)
	want := "{\n  \"a\": \"x\\u009by\\u202ez\\ufffd\",\n\t\"b\": \"\\u001b\"\n}\n"
	if string(got) != want {
		t.Fatalf("jsonSafe = %q, want %q", got, want)
	}
	var v map[string]string
	if err := json.Unmarshal(got, &v); err != nil || v["a"] != "x\u009by\u202ez\ufffd" {
		t.Fatalf("jsonSafe's output decodes to %q (%v)", v, err)
	}
}
