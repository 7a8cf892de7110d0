package securitytest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Non-finite numbers (issue 10 item 4): a JSON number such as 1e400 has
// no float64 value; decoded, it is ±Inf. A wake payload, a signal payload
// or a run input carrying one is refused — 400 on POST /wake/{token},
// exit 2 (payloads) or 1 (inputs) on the CLI — before anything is
// consumed: the single-use token still wakes its wait afterwards.

const numbersWorkflow = `name: numbers
steps:
  - id: ask
    wait:
      signal: go
      notify: {url: "%s"}
output: "${{ steps.ask.output }}"
`

// runState reads a run's status and output with `starflow runs show`.
func runState(t *testing.T, dir, db, id string) (status string, output json.RawMessage) {
	t.Helper()
	r := runStarflow(t, dir, nil, "runs", "show", id, "--db", db, "--json")
	var run struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatalf("runs show %s: %v\n%s%s", id, err, r.stdout, r.stderr)
	}
	return run.Status, run.Output
}

// runCount is how many runs `starflow runs list` shows.
func runCount(t *testing.T, dir, db string) int {
	t.Helper()
	r := runStarflow(t, dir, nil, "runs", "list", "--db", db, "--json", "--limit", "1000")
	var runs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("runs list: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return len(runs)
}

func postWake(t *testing.T, wakeURL, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(wakeURL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

// TestNonFiniteNumbersRefusedBeforeConsuming: 1e400 in a wake over HTTP
// and the CLI, in a signal, and in an enqueue or run input is refused
// with an error naming the number and where it is; nothing is consumed
// or created; the same token then wakes the wait with a valid payload and
// the run succeeds with it.
func TestNonFiniteNumbersRefusedBeforeConsuming(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notify := newNotifySink(t)
	def := writeFile(t, dir, "numbers.yaml", strings.Replace(numbersWorkflow, "%s", notify.srv.URL, 1))
	runID := applyAndEnqueue(t, dir, def, "numbers", "n.db")
	d := startListener(t, dir, nil, "dev", "--db", "n.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms")
	body := notify.next(t)
	token, _ := body["token"].(string)
	wakeURL, _ := body["wake_url"].(string)
	if token == "" || !strings.HasPrefix(wakeURL, d.base+"/wake/") {
		t.Fatalf("notify body %v: no token or wake_url on %s", body, d.base)
	}

	// HTTP: 400 problem documents naming the number and its path.
	for _, tc := range []struct{ payload, number, path string }{
		{`{"amount": 1e400}`, "1e400", "$.amount"},
		{`{"items": [1, {"qty": -1e400}]}`, "-1e400", "$.items[1].qty"},
		{`1` + strings.Repeat("0", 400), "1000000000", "$"},
	} {
		code, p := postWake(t, wakeURL, tc.payload)
		detail, _ := p["detail"].(string)
		if code != 400 || p["status"] != 400.0 || !strings.Contains(detail, tc.number) || !strings.Contains(detail, tc.path) ||
			!strings.Contains(detail, "out of range") {
			t.Fatalf("POST wake with %.40s: %d %v, want a 400 naming %s at %s", tc.payload, code, p, tc.number, tc.path)
		}
	}

	// CLI wake: exit 2, inline and from a file (with the line).
	r := runStarflow(t, dir, nil, "wake", token, "--db", "n.db", "--payload", `{"amount": 1e400}`)
	if r.code != 2 || !strings.Contains(r.stderr, "1e400") || !strings.Contains(r.stderr, "$.amount") {
		t.Fatalf("starflow wake with 1e400: exit %d, stderr %q; want exit 2 naming the number", r.code, r.stderr)
	}
	payloadFile := writeFile(t, dir, "payload.json", "{\n  \"ok\": true,\n  \"amount\": -1e400\n}\n")
	r = runStarflow(t, dir, nil, "wake", token, "--db", "n.db", "--payload", "@"+payloadFile)
	if r.code != 2 || !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "payload file") {
		t.Fatalf("starflow wake with a payload file holding -1e400: exit %d, stderr %q", r.code, r.stderr)
	}

	// CLI signal: exit 2, nothing delivered or held.
	r = runStarflow(t, dir, nil, "signal", runID, "go", "--db", "n.db", "--payload", `[1e400]`)
	if r.code != 2 || !strings.Contains(r.stderr, "out of range") {
		t.Fatalf("starflow signal with 1e400: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runStarflow(t, dir, nil, "signal", "--correlation-key", "k1", "go", "--db", "n.db", "--payload", `{"x": 1e400}`)
	if r.code != 2 {
		t.Fatalf("starflow signal --correlation-key with 1e400: exit %d, stderr %q", r.code, r.stderr)
	}

	// Inputs: an error, no run created.
	before := runCount(t, dir, "n.db")
	r = runStarflow(t, dir, nil, "enqueue", "numbers", "--db", "n.db", "--input", `{"qty": 1e400}`)
	if r.code == 0 || !strings.Contains(r.stderr, "$.qty") || !strings.Contains(r.stderr, "out of range") {
		t.Fatalf("enqueue with 1e400: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runStarflow(t, dir, nil, "run", def, "--db", "n.db", "--input", `{"qty": -1e400}`)
	if r.code == 0 || !strings.Contains(r.stderr, "out of range") {
		t.Fatalf("run with -1e400: exit %d, stderr %q", r.code, r.stderr)
	}
	if after := runCount(t, dir, "n.db"); after != before {
		t.Fatalf("a refused input created a run: %d runs before, %d after", before, after)
	}

	// Nothing was consumed: the run still waits, and the same token wakes it.
	if status, _ := runState(t, dir, "n.db", runID); status != "paused" {
		t.Fatalf("after the refusals the run is %s, want paused", status)
	}
	if code, p := postWake(t, wakeURL, `{"amount": 1e300, "ok": true}`); code != 200 || p["status"] != "woken" {
		t.Fatalf("the same token with a valid payload: %d %v", code, p)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, out := runState(t, dir, "n.db", runID)
		if status == "succeeded" {
			var o map[string]any
			if err := json.Unmarshal(out, &o); err != nil || o["amount"] != 1e300 || o["ok"] != true {
				t.Fatalf("run output %s, want the valid payload", out)
			}
			break
		}
		if status == "failed" || time.Now().After(deadline) {
			t.Fatalf("run %s after the valid wake", status)
		}
		time.Sleep(100 * time.Millisecond) // polling the run's status through the CLI
	}
}

// TestNonFiniteNumberInDefinitionRefused: a definition with .inf, .nan or
// 1e400 in a literal is refused by validate and apply with file:line:col.
func TestNonFiniteNumberInDefinitionRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct{ src, where, what string }{
		"inf.yaml":   {"name: a\nsteps:\n  - id: a\n    context_set: {x: .inf}\n", "inf.yaml:4:22", "numbers must be finite"},
		"nan.yaml":   {"name: a\nsteps:\n  - id: a\n    context_set: {x: [1, .NaN]}\n", "nan.yaml:4:26", "numbers must be finite"},
		"big.yaml":   {"name: a\noutput: {x: 1e400}\nsteps:\n  - id: a\n    context_set: {x: 1}\n", "big.yaml:2:13", "number 1e400 is out of range"},
		"big.json":   {`{"name": "a", "steps": [{"id": "a", "context_set": {"x": -2e308}}]}`, "big.json:1:58", "number -2e308 is out of range"},
		"input.yaml": {"name: a\ninput_schema: {type: object, properties: {q: {maximum: .inf}}}\nsteps:\n  - id: a\n    context_set: {x: 1}\n", "input.yaml:2:56", "numbers must be finite"},
	} {
		path := writeFile(t, dir, name, tc.src)
		for _, verb := range []string{"validate", "apply"} {
			r := runStarflow(t, dir, nil, verb, path, "--db", "d.db")
			if r.code == 0 || !strings.Contains(r.stderr, tc.where) || !strings.Contains(r.stderr, tc.what) {
				t.Errorf("%s %s: exit %d, stderr %q; want %s: %s", verb, name, r.code, r.stderr, tc.where, tc.what)
			}
		}
	}
}
