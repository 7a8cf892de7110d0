package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestCLIResumeRefusalsSayWhatCan: resuming a succeeded run says which
// runs can be resumed, and a run without a checkpoint how to resume it
// (--mode replay, the flag, also through a server), the same words on
// the store and through the server, without a store package's prefix.
func TestCLIResumeRefusalsSayWhatCan(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "three.yaml", threeSteps)
	res := f.local(t, "run", "three.yaml")
	m := regexp.MustCompile(`run ([0-9a-f-]{36}) succeeded`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("run: %s %s", res.stdout, res.stderr)
	}
	done := m[1]
	r := f.same(t, true, "runs", "resume", done)
	mustCode(t, "resume a succeeded run", r, 1, "only an interrupted, failed or cancelled run that no runner holds can be resumed (retrigger it")
	if strings.Contains(r.stderr, "sqlitestore") {
		t.Errorf("resume: the store's prefix shows: %s", r.stderr)
	}

	delayed := strings.TrimSpace(f.local(t, "enqueue", "three", "--delay", "1h").stdout)
	if c := f.local(t, "runs", "cancel", delayed); c.code != 0 {
		t.Fatalf("cancel: %d %s", c.code, c.stderr)
	}
	r = f.same(t, true, "runs", "resume", delayed)
	mustCode(t, "resume without a checkpoint", r, 1, "no_checkpoint: run "+delayed+" has no checkpoint to resume from: no step of it committed; resume it with --mode replay")
	if strings.Contains(r.stderr, `"mode"`) {
		t.Errorf("the CLI names the API's body field: %s", r.stderr)
	}
}
