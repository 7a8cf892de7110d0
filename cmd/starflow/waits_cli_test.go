package main

import (
	"os"
	"path/filepath"
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

// TestCLIBadWakeKeys: a malformed STARFLOW_WAKE_KEYS is named once, with
// the entry that is wrong, by every command that reads it — no doubled
// "starflow: " prefix and no Go field name.
func TestCLIBadWakeKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: q\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	if r := starflowCmd(t, dir, nil, "migrate", "--db", "k.db"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	env := []string{"STARFLOW_WAKE_KEYS=k1:short"}
	for _, args := range [][]string{
		{"wake", "tok", "--db", "k.db"},
		{"signal", "run", "go", "--db", "k.db"},
		{"run", "wf.yaml", "--db", "k.db"},
		{"worker", "--db", "k.db"},
		{"dev", "--db", "k.db", "--addr", "127.0.0.1:0"},
	} {
		r := starflowCmd(t, dir, env, args...)
		want := "starflow: STARFLOW_WAKE_KEYS entry 1 (key \"k1\"): the secret is"
		if r.code != 1 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "starflow: ") != 1 || strings.Contains(r.stderr, "Config.") {
			t.Errorf("starflow %s: exit %d, stderr %q; want exit 1 and %q…", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
}

// TestCLIWakeKeysAndKeyFileBoth: STARFLOW_WAKE_KEYS and
// STARFLOW_WAKE_KEY_FILE together are refused, naming both, before
// anything starts; STARFLOW_WAKE_KEY_FILE alone is the ring (its file is
// created 0600 by the first command that signs).
func TestCLIWakeKeysAndKeyFileBoth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: q\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	both := []string{"STARFLOW_WAKE_KEYS=k1:" + strings.Repeat("QUJD", 11), "STARFLOW_WAKE_KEY_FILE=" + filepath.Join(dir, "ring")}
	r := starflowCmd(t, dir, both, "run", "wf.yaml", "--db", "k.db")
	if r.code != 1 || !strings.Contains(r.stderr, "both STARFLOW_WAKE_KEYS and STARFLOW_WAKE_KEY_FILE are set") {
		t.Fatalf("both set: exit %d, stderr %q", r.code, r.stderr)
	}
	r = starflowCmd(t, dir, []string{"STARFLOW_WAKE_KEY_FILE=" + filepath.Join(dir, "ring")}, "run", "wf.yaml", "--db", "k.db")
	if r.code != 0 {
		t.Fatalf("key file: exit %d, stderr %q", r.code, r.stderr)
	}
	fi, err := os.Stat(filepath.Join(dir, "ring"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("STARFLOW_WAKE_KEY_FILE: %v %v, want a 0600 file", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k.db.wakekeys")); !os.IsNotExist(err) {
		t.Fatalf("the default key file was made although STARFLOW_WAKE_KEY_FILE names one: %v", err)
	}
}
