package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestCLISecretsNeverShown: a run that sends a secret to an echoing
// service and fails with it in the message never shows the value — not in
// `run`'s output and logs (-v), not in `runs show|ledger|events --json`.
func TestCLISecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "cli-secret-7f3a9c2e"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"auth": r.Header.Get("Authorization"), "query": r.URL.RawQuery})
	}))
	defer echo.Close()
	dir := t.TempDir()
	writeFile(t, dir, "s.yaml", `name: secretive
secrets: [SF_CLI_TEST_TOKEN]
steps:
  - id: call
    service_call:
      url: "`+echo.URL+`"
      headers: {Authorization: "${{ 'Bearer ' + secrets.SF_CLI_TEST_TOKEN }}"}
      query: {t: "${{ secrets.SF_CLI_TEST_TOKEN }}"}
  - id: copy
    context_set: {echoed: "${{ steps.call.output.body }}", phase: "${{ 'got ' + secrets.SF_CLI_TEST_TOKEN }}"}
  - id: boom
    fail: {message: "${{ 'the token is ' + secrets.SF_CLI_TEST_TOKEN }}"}
`)
	env := []string{"SF_CLI_TEST_TOKEN=" + secret}
	res := starflowCmd(t, dir, env, "run", "s.yaml", "--db", "s.db", "-v")
	id := regexp.MustCompile(`run ([0-9a-f-]{36}) failed`).FindStringSubmatch(res.stdout)
	if res.code != 1 || id == nil || !strings.Contains(res.stderr, "the token is ***") {
		t.Fatalf("run: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	outputs := []string{res.stdout, res.stderr}
	for _, args := range [][]string{{"runs", "show", id[1]}, {"runs", "ledger", id[1]}, {"runs", "events", id[1]}, {"runs", "list"}} {
		for _, format := range [][]string{nil, {"--json"}} {
			r := starflowCmd(t, dir, nil, append(append(args, "--db", "s.db"), format...)...)
			if r.code != 0 {
				t.Fatalf("%v: %s", args, r.stderr)
			}
			outputs = append(outputs, r.stdout, r.stderr)
		}
	}
	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))}
	for _, out := range outputs {
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Fatalf("secret (as %q) shown:\n%s", f, out)
			}
		}
	}
}
