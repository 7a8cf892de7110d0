package crashtest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const earlySignalWorkflow = `name: early
recovery_mode: resume
steps:
  - id: first
    context_set: {order: "${{ input.order }}"}
  - id: approve
    wait:
      signal: go
      correlation_key: "${{ input.order }}"
output: "${{ steps.approve.output }}"
`

// TestEarlySignalWaitsInInbox (issue 5, Acceptance): signals sent with
// `starflow signal` right after enqueue — before any process ran the run
// to its wait — are not lost: they are held in the durable wake inbox and
// consumed when the wait registers, each run then completing with its
// signal's payload, woken exactly once. One signal is addressed by run,
// one by correlation key. A signal to an ended or unknown run is refused
// with a clear message.
func TestEarlySignalWaitsInInbox(t *testing.T) {
	t.Parallel()
	d := newLiteDeploy(t)
	d.apply("early", earlySignalWorkflow)
	byRun := d.enqueue("early", map[string]any{"order": "order-1"})
	byKey := d.enqueue("early", map[string]any{"order": "order-2"})

	// No process runs yet: neither run can have reached its wait.
	out := d.mustCLI("signal", byRun, "go", "--payload", `{"approved": true, "by": "run"}`)
	if !strings.Contains(out, "held in the wake inbox") {
		t.Fatalf("signal by run before the wait: %q, want it held in the inbox", out)
	}
	out = d.mustCLI("signal", "--correlation-key", "order-2", "go", "--payload", `{"approved": true, "by": "key"}`)
	if !strings.Contains(out, "held in the wake inbox") {
		t.Fatalf("signal by key before the wait: %q, want it held in the inbox", out)
	}
	if n := d.count(`SELECT count(*) FROM workflow_wake_inbox WHERE consumed_at IS NULL`); n != 2 {
		t.Fatalf("%d unconsumed inbox rows, want 2", n)
	}

	d.startProc("worker", nil, "--poll-interval", "100ms")
	for id, by := range map[string]string{byRun: "run", byKey: "key"} {
		r := d.waitRunEnded(id, 60*time.Second)
		if r.status != "succeeded" {
			t.Fatalf("run %s (signal by %s): %s", id, by, r.status)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(r.output), &got); err != nil || got["by"] != by || got["approved"] != true {
			t.Errorf("run %s output %s, want the payload of the signal by %s", id, r.output, by)
		}
		if n := d.events(id, "wake_received", ""); n != 1 {
			t.Errorf("run %s: %d wake_received events, want 1", id, n)
		}
		if n := d.events(id, "node_complete", "approve"); n != 1 {
			t.Errorf("run %s: wait step completed %d times, want 1", id, n)
		}
		waits := d.mustCLI("runs", "waits", id)
		if !strings.Contains(waits, "woken") || !strings.Contains(waits, "approve") {
			t.Errorf("runs waits %s:\n%s", id, waits)
		}
	}
	if n := d.count(`SELECT count(*) FROM workflow_wake_inbox WHERE consumed_at IS NULL`); n != 0 {
		t.Fatalf("%d inbox rows left unconsumed", n)
	}

	// The run has ended: a late signal is refused, not queued for ever.
	late := d.cli("signal", byRun, "go", "--payload", `{}`)
	if late.code == 0 || !strings.Contains(late.stderr, "has ended") {
		t.Errorf("signal to an ended run: exit %d, %q", late.code, late.stderr)
	}
	unknown := d.cli("signal", "00000000-0000-0000-0000-000000000000", "go")
	if unknown.code == 0 || !strings.Contains(unknown.stderr, "no run with id") {
		t.Errorf("signal to an unknown run: exit %d, %q", unknown.code, unknown.stderr)
	}
}
