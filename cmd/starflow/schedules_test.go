package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const cliScheduledWF = `name: nightly
schedules:
  - {cron: "0 9 * * MON-FRI", timezone: Europe/Berlin}
  - {cron: "@hourly", overlap: allow, catchup: all, input: {n: 1}}
steps:
  - {id: a, pass: 1}
`

// TestCLISchedules: schedules list, pause and resume print the same on
// the store and through a server; an unknown workflow exits 1; a viewer
// lists but cannot pause; --next is checked before anything is read.
func TestCLISchedules(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	if r := f.local(t, "apply", writeFile(t, f.dir, "nightly.yaml", cliScheduledWF)); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	// The server's scheduler writes each new schedule's next fire time at
	// its first pass; compare the local and remote listings after it, not
	// across it.
	deadline := time.Now().Add(20 * time.Second)
	for r := f.local(t, "schedules", "list", "--json"); strings.Count(r.stdout, `"next_fire_at"`) < 2; r = f.local(t, "schedules", "list", "--json") {
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not take the schedules up within 20 s:\n%s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := f.same(t, false, "schedules", "list")
	for _, want := range []string{"WORKFLOW", "nightly", "0 9 * * MON-FRI", "Europe/Berlin", "@hourly", "allow", "active"} {
		if !strings.Contains(l.stdout, want) {
			t.Errorf("schedules list lacks %q:\n%s", want, l.stdout)
		}
	}
	j := f.same(t, false, "schedules", "list", "--json", "--next", "2")
	var list []struct {
		Workflow      string   `json:"workflow"`
		Index         int      `json:"index"`
		Catchup       string   `json:"catchup"`
		Paused        bool     `json:"paused"`
		NextFireTimes []string `json:"next_fire_times"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &list); err != nil || len(list) != 2 || list[1].Catchup != "all" || len(list[1].NextFireTimes) != 2 {
		t.Fatalf("schedules list --json: %v\n%s", err, j.stdout)
	}
	p := f.same(t, true, "schedules", "pause", "nightly")
	if !strings.Contains(p.stdout, "paused") || !strings.Contains(p.stderr, "paused the schedules of nightly (2)") {
		t.Errorf("pause: %q %q", p.stdout, p.stderr)
	}
	if r := f.local(t, "schedules", "list", "--json"); !strings.Contains(r.stdout, `"paused": true`) {
		t.Errorf("after the pause: %s", r.stdout)
	}
	r := f.same(t, true, "schedules", "resume", "nightly")
	if !strings.Contains(r.stdout, "active") || strings.Contains(r.stdout, "paused") {
		t.Errorf("resume: %q", r.stdout)
	}
	mustCode(t, "pause an unknown workflow", f.same(t, true, "schedules", "pause", "nope"), 1, `no workflow "nope"`)
	if r := f.remote(t, f.viewer, "schedules", "list"); r.code != 0 || !strings.Contains(r.stdout, "nightly") {
		t.Errorf("a viewer lists: %d %s", r.code, r.stderr)
	}
	mustCode(t, "a viewer pauses", f.remote(t, f.viewer, "schedules", "pause", "nightly"), 1, "operator")
	if r := f.remote(t, f.other, "schedules", "list"); r.code != 0 || strings.Contains(r.stdout, "nightly") {
		t.Errorf("another workspace's key sees: %d %q", r.code, r.stdout)
	}
	mustCode(t, "--next 0", f.local(t, "schedules", "list", "--next", "0"), 2, "--next 0 is out of range: it must be 1 or more")
	mustCode(t, "--next 51", f.local(t, "schedules", "list", "--next", "51"), 2, "--next must be 1 to 50")
}
