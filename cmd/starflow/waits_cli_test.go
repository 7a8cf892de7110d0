package main

import (
	"strings"
	"testing"
)

// TestCLIWaitCommandsRefuseBadInput: --payload must be JSON (exit 2,
// naming the flag and the position); signal needs RUN and NAME, or
// --correlation-key and NAME.
func TestCLIWaitCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"wake", "tok", "--payload", `{"a": }`}, 2, "--payload is not valid JSON"},
		{[]string{"signal", "run", "go", "--payload", `[1,`}, 2, "--payload is not valid JSON"},
		{[]string{"signal", "run", "go", "--payload", "@missing.json"}, 2, "cannot read payload file missing.json"},
		{[]string{"signal", "go"}, 1, "give RUN and NAME"},
		{[]string{"signal", "--correlation-key", "k", "run", "go"}, 1, "with --correlation-key give only NAME"},
		{[]string{"wake"}, 1, "accepts 1 arg"},
		{[]string{"runs", "waits", "nope", "--db", "absent.db"}, 1, "no Starflow database at absent.db"},
	}
	for _, c := range cases {
		r := starflowCmd(t, dir, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("starflow %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.want)
		}
	}
}
