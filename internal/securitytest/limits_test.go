package securitytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Caps (issue 10 item 7): a definition, an input, a payload, a for_each's
// items and concurrency, a repeat_until's max_iterations and the nesting of
// constructs over their caps are each refused through the real CLI with an
// error naming the cap and how to raise it; raising it (flag or
// environment) lets the same thing through.

// limitsCLI runs the starflow binary in dir with args (and extra env).
func limitsCLI(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func limitsWrite(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// limitsRefused checks a refusal: the exit code, and the message (on
// stderr or stdout) containing each of want.
func limitsRefused(t *testing.T, what string, stdout, stderr string, code, wantCode int, want ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, code, wantCode, stdout, stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(stderr+stdout, w) {
			t.Errorf("%s: no %q in\nstdout: %s\nstderr: %s", what, w, stdout, stderr)
		}
	}
}

// bigJSON is a JSON object of more than n bytes.
func bigJSON(n int) string {
	return `{"pad": "` + strings.Repeat("p", n) + `"}`
}

func TestLimitsDefinitionSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "name: big\nsteps:\n  - id: a\n    context_set: {x: 1}\n# " + strings.Repeat("x", 1<<20) + "\n"
	limitsWrite(t, dir, "big.yaml", src)
	size := len(src)
	for _, args := range [][]string{
		{"validate", "big.yaml"},
		{"apply", "big.yaml", "--db", "s.db"},
		{"run", "big.yaml", "--db", "s.db"},
	} {
		o, e, c := limitsCLI(t, dir, nil, args...)
		limitsRefused(t, args[0], o, e, c, 1, "big.yaml: the definition source ("+limitsItoa(size)+" bytes) exceeds the limit of 1048576 "+
			"(limits.definition_bytes; raise it with --max-definition-bytes, STARFLOW_MAX_DEFINITION_BYTES or starflow.Config.Limits.SourceBytes)")
	}
	if o, e, c := limitsCLI(t, dir, nil, "validate", "big.yaml", "--max-definition-bytes", "2097152"); c != 0 {
		t.Errorf("validate with the cap raised by flag: %d %s %s", c, o, e)
	}
	if o, e, c := limitsCLI(t, dir, []string{"STARFLOW_MAX_DEFINITION_BYTES=2097152"}, "apply", "big.yaml", "--db", "s.db"); c != 0 {
		t.Errorf("apply with the cap raised by the environment: %d %s %s", c, o, e)
	}
}

func TestLimitsStaticCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nest := func(depth int) string {
		var b strings.Builder
		b.WriteString("name: deep\nsteps:\n")
		indent := "  "
		for i := range depth {
			b.WriteString(indent + "- id: t" + limitsItoa(i) + "\n" + indent + "  try:\n" + indent + "    steps:\n")
			indent += "      "
		}
		b.WriteString(indent + "- id: leaf\n" + indent + "  context_set: {x: 1}\n")
		return b.String()
	}
	cases := []struct {
		file, src string
		want      string
		raise     []string
	}{
		{"concurrency.yaml", "name: c\nsteps:\n  - id: ship\n    for_each:\n      items: input.xs\n      concurrency: 1000\n      steps: [{id: x, context_set: {v: 1}}]\n",
			"concurrency.yaml:6:20: for_each ship: concurrency 1000 exceeds the limit of 64 (limits.for_each_concurrency; raise it with --max-for-each-concurrency, STARFLOW_MAX_FOR_EACH_CONCURRENCY or starflow.Config.Limits.ForEachConcurrency)",
			[]string{"--max-for-each-concurrency", "1000"}},
		{"iterations.yaml", "name: i\nsteps:\n  - id: poll\n    repeat_until:\n      steps: [{id: x, context_set: {v: 1}}]\n      until: false\n      max_iterations: 1000000\n",
			"iterations.yaml:7:23: repeat_until poll: max_iterations 1000000 exceeds the limit of 10000 (limits.max_iterations; raise it with --max-iterations, STARFLOW_MAX_ITERATIONS or starflow.Config.Limits.MaxIterations)",
			[]string{"--max-iterations", "1000000"}},
		{"deep.yaml", nest(33), "(limits.nesting_depth; raise it with --max-nesting-depth, STARFLOW_MAX_NESTING_DEPTH or starflow.Config.Limits.NestingDepth)",
			[]string{"--max-nesting-depth", "40"}},
	}
	for _, c := range cases {
		limitsWrite(t, dir, c.file, c.src)
		for _, cmd := range [][]string{{"validate", c.file}, {"apply", c.file, "--db", "s.db"}} {
			o, e, code := limitsCLI(t, dir, nil, cmd...)
			limitsRefused(t, cmd[0]+" "+c.file, o, e, code, 1, c.want)
		}
		if o, e, code := limitsCLI(t, dir, nil, append([]string{"validate", c.file}, c.raise...)...); code != 0 {
			t.Errorf("validate %s %v: %d %s %s", c.file, c.raise, code, o, e)
		}
	}
	if !regexp.MustCompile(`deep\.yaml:\d+:\d+: control flow nests more than 32 constructs deep`).MatchString(func() string {
		_, e, _ := limitsCLI(t, dir, nil, "validate", "deep.yaml")
		return e
	}()) {
		t.Error("the nesting refusal names no file:line:col")
	}
}

func TestLimitsInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limitsWrite(t, dir, "wf.yaml", "name: echo\nsteps:\n  - id: a\n    context_set: {x: \"${{ input }}\"}\n")
	big := bigJSON(1 << 20)
	limitsWrite(t, dir, "big.json", big)
	if o, e, c := limitsCLI(t, dir, nil, "apply", "wf.yaml", "--db", "s.db"); c != 0 {
		t.Fatalf("apply: %s %s", o, e)
	}
	want := "big.json: the run input (" + limitsItoa(len(big)) + " bytes as JSON) exceeds the limit of 1048576 " +
		"(limits.input_bytes; raise it with --max-input-bytes, STARFLOW_MAX_INPUT_BYTES or starflow.Config.Limits.InputBytes)"
	o, e, c := limitsCLI(t, dir, nil, "enqueue", "echo", "--input", "@big.json", "--db", "s.db")
	limitsRefused(t, "enqueue", o, e, c, 1, want)
	o, e, c = limitsCLI(t, dir, nil, "run", "wf.yaml", "--input", "@big.json", "--db", "s.db")
	limitsRefused(t, "run", o, e, c, 1, want)
	if o, _, _ := limitsCLI(t, dir, nil, "runs", "list", "--db", "s.db", "--json"); strings.Contains(o, `"id"`) {
		t.Fatalf("a refused input created a run: %s", o)
	}
	// Raised, the same input goes through.
	o, e, c = limitsCLI(t, dir, []string{"STARFLOW_MAX_INPUT_BYTES=4194304"}, "enqueue", "echo", "--input", "@big.json", "--db", "s.db")
	if c != 0 || strings.TrimSpace(o) == "" {
		t.Fatalf("enqueue with the cap raised: %d %s %s", c, o, e)
	}
}

func TestLimitsForEach(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limitsWrite(t, dir, "many.yaml", `name: many
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(input.n) }}"
      steps: [{id: x, context_set: {v: "${{ item }}"}}]
`)
	o, e, c := limitsCLI(t, dir, nil, "run", "many.yaml", "--input", `{"n": 10001}`, "--db", "s.db")
	limitsRefused(t, "run 10001 items", o, e, c, 1,
		"for_each ship: 10001 items exceed the limit of 10000 (limits.for_each_items; raise it with --max-for-each-items, STARFLOW_MAX_FOR_EACH_ITEMS or starflow.Config.Limits.ForEachItems)")
	if strings.Contains(o, "✓ ship.item_0/x") {
		t.Errorf("an item ran before the cap was checked:\n%s", o)
	}
	o, e, c = limitsCLI(t, dir, []string{"STARFLOW_MAX_FOR_EACH_ITEMS=5"}, "run", "many.yaml", "--input", `{"n": 6}`, "--db", "s.db")
	limitsRefused(t, "run 6 items over an env cap of 5", o, e, c, 1, "for_each ship: 6 items exceed the limit of 5 (limits.for_each_items")
	if o, e, c := limitsCLI(t, dir, nil, "run", "many.yaml", "--input", `{"n": 6}`, "--max-for-each-items", "6", "--db", "s.db"); c != 0 {
		t.Errorf("run 6 items at a cap of 6: %d %s %s", c, o, e)
	}
}

// limitsSink receives notify requests and hands out their tokens.
type limitsSink struct {
	mu     sync.Mutex
	tokens []string
	srv    *httptest.Server
}

func newLimitsSink(t *testing.T) *limitsSink {
	s := &limitsSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		if tok, _ := m["token"].(string); tok != "" {
			s.mu.Lock()
			s.tokens = append(s.tokens, tok)
			s.mu.Unlock()
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *limitsSink) token(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		if len(s.tokens) > 0 {
			tok := s.tokens[0]
			s.mu.Unlock()
			return tok
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no notify request with a token")
	return ""
}

// TestLimitsPayload: a wake or signal payload over the cap is refused by
// `starflow wake`, `starflow signal` and POST /wake/{token} of `starflow
// dev` (413), and the token is not spent: the same token then wakes the
// run with a payload within the cap.
func TestLimitsPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newLimitsSink(t)
	limitsWrite(t, dir, "wf.yaml", "name: waiting\nsteps:\n  - id: w\n    wait: {signal: go, notify: {url: \""+sink.srv.URL+"\"}}\n")
	big := bigJSON(1 << 20)
	limitsWrite(t, dir, "big.json", big)
	if o, e, c := limitsCLI(t, dir, nil, "apply", "wf.yaml", "--db", "p.db"); c != 0 {
		t.Fatalf("apply: %s %s", o, e)
	}
	o, e, c := limitsCLI(t, dir, nil, "enqueue", "waiting", "--db", "p.db")
	if c != 0 {
		t.Fatalf("enqueue: %s %s", o, e)
	}
	runID := strings.TrimSpace(o)

	dev := exec.Command(Binary(t), "dev", "--db", "p.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms")
	dev.Dir = dir
	var devErr limitsBuffer
	dev.Stderr = &devErr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = dev.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = dev.Process.Kill()
		<-exited
	})
	tok := sink.token(t)
	base := ""
	for deadline := time.Now().Add(30 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(devErr.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("dev did not listen:\n%s", devErr.String())
	}

	want := "exceeds the limit of 1048576 (limits.payload_bytes; raise it with --max-payload-bytes, STARFLOW_MAX_PAYLOAD_BYTES or starflow.Config.Limits.PayloadBytes)"
	o, e, c = limitsCLI(t, dir, nil, "wake", tok, "--payload", "@big.json", "--db", "p.db")
	limitsRefused(t, "wake", o, e, c, 2, "payload file big.json: the payload ("+limitsItoa(len(big))+" bytes as JSON) "+want)
	o, e, c = limitsCLI(t, dir, nil, "signal", runID, "go", "--payload", "@big.json", "--db", "p.db")
	limitsRefused(t, "signal", o, e, c, 2, want)

	resp, err := http.Post(base+"/wake/"+tok, "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "(limits.payload_bytes; raise it with --max-payload-bytes") {
		t.Fatalf("POST /wake over the cap: %d %s", resp.StatusCode, body)
	}

	// Nothing was spent: the token wakes the run (a stored "go" signal
	// would have woken the wait already, and the token would be refused).
	if o, e, c := limitsCLI(t, dir, nil, "wake", tok, "--payload", `{"ok": true}`, "--db", "p.db"); c != 0 {
		t.Fatalf("the refused wakes spent the token: %d %s %s", c, o, e)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		o, _, _ := limitsCLI(t, dir, nil, "runs", "show", runID, "--db", "p.db", "--json")
		var run struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal([]byte(o), &run)
		if run.Status == "succeeded" {
			var compact bytes.Buffer
			if err := json.Compact(&compact, run.Output); err != nil || compact.String() != `{"ok":true}` {
				t.Fatalf("output %s", run.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not woken: %s", o)
		}
	}
}

// limitsBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads.
type limitsBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *limitsBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *limitsBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func limitsItoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
