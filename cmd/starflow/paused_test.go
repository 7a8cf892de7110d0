package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// TestWaitWording: what each kind of wait is said to wait for, and how
// it is said to be woken (the words of run, runs show and runs resume).
func TestWaitWording(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		w         starflowtype.Wait
		for_, how string
	}{
		{starflowtype.Wait{StepID: "ok", Kind: starflowtype.WaitSignal, Signal: "go", ExpiresAt: at},
			"signal go, timing out at 2030-01-02 03:04:05.000Z",
			"wake it: starflow signal R go --payload '{}' --db x.db"},
		{starflowtype.Wait{StepID: "ok", Kind: starflowtype.WaitSignal, Signal: "go", CorrelationKey: "order-1", Notify: json.RawMessage(`{"url":"http://h"}`)},
			"signal go with correlation key order-1",
			"wake it: starflow signal R go --payload '{}' --db x.db; or with the token sent to its notify URL: starflow wake TOKEN --payload '{}' --db x.db (or POST the payload to the wake_url it received)"},
		{starflowtype.Wait{StepID: "mgr", Kind: starflowtype.WaitApproval, Signal: "decision"},
			"approval (signal decision)",
			`wake it: starflow signal R decision --payload '{"approved": true}' --db x.db`},
		{starflowtype.Wait{StepID: "nap", Kind: starflowtype.WaitTimer, WakeAt: at},
			"timer until 2030-01-02 03:04:05.000Z",
			"it fires at 2030-01-02 03:04:05.000Z (in "},
		{starflowtype.Wait{StepID: "call", Kind: starflowtype.WaitChild, Signal: starflowtype.ChildSignal, CorrelationKey: "C"},
			"child run C",
			"it wakes when child run C ends (starflow runs show C)"},
	}
	for _, c := range cases {
		if got := waitsFor(&c.w); got != c.for_ {
			t.Errorf("waitsFor(%s) = %q, want %q", c.w.Kind, got, c.for_)
		}
		if got := wakeHow("R", &c.w, " --db x.db"); !strings.HasPrefix(got, c.how) {
			t.Errorf("wakeHow(%s) = %q, want %q…", c.w.Kind, got, c.how)
		}
	}
	two := []*starflowtype.Wait{&cases[0].w, {ScopePath: "lane", StepID: "nap", Kind: starflowtype.WaitTimer, WakeAt: at}}
	if got, want := pausedAt(two), "paused at step ok waiting for signal go, timing out at 2030-01-02 03:04:05.000Z, and at step lane/nap waiting for timer until 2030-01-02 03:04:05.000Z"; got != want {
		t.Errorf("pausedAt = %q, want %q", got, want)
	}
	if got := pausedAt(nil); got != "paused" {
		t.Errorf("pausedAt(none) = %q", got)
	}
	g := &globalFlags{store: "postgres://u:secret@h/db"}
	if got := g.storeArg(); strings.Contains(got, "secret") || !strings.HasPrefix(got, " --store '") {
		t.Errorf("storeArg with a password = %q", got)
	}
	g = &globalFlags{store: "postgres://postgres@h/db?schema=s"}
	if got := g.storeArg(); got != " --store 'postgres://postgres@h/db?schema=s'" {
		t.Errorf("storeArg = %q", got)
	}
}
