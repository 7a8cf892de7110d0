package crashtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// notifyRecorder is the approval app of the boundary tests: it receives
// the notify requests of waits and checks, as each arrives, that the wait
// it names is committed in the database — a token must never be delivered
// before its wait is registered.
type notifyRecorder struct {
	srv   *httptest.Server
	store state.Adapter

	mu         sync.Mutex
	received   []map[string]any
	violations []string
}

func newNotifyRecorder(t *testing.T, store state.Adapter) *notifyRecorder {
	t.Helper()
	n := &notifyRecorder{store: store}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			n.violate("notify body is not JSON: %v", err)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		waitID, _ := body["wait_id"].(string)
		token, _ := body["token"].(string)
		if waitID == "" || token == "" {
			n.violate("notify without wait_id or token: %v", body)
		} else if _, err := store.GetWait(r.Context(), &state.GetWaitParams{ID: waitID}); err != nil {
			n.violate("token of wait %s delivered before the wait is committed: %v", waitID, err)
		}
		n.mu.Lock()
		n.received = append(n.received, body)
		n.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *notifyRecorder) violate(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.violations = append(n.violations, fmt.Sprintf(format, args...))
}

func (n *notifyRecorder) check(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, v := range n.violations {
		t.Error(v)
	}
}

const boundaryWorkflow = `name: boundary
recovery_mode: resume
max_attempts: 5
steps:
  - id: first
    context_set: {started: true}
  - id: approve
    wait:
      signal: go
      notify: {url: "%s/hook", body: {note: "approve please"}}
  - id: after
    context_set: {approved: "${{ steps.approve.output.approved }}"}
output: "${{ steps.approve.output }}"
`

// boundaryPoints are the commit boundaries of enterDurableWait (seed 000
// "The wait/wake ordering invariant"; state.Waiter): inside each of the
// three transactions just before its commit (sqlite.<Op>.before_commit),
// and between them (engine.wait.*). Between transactions the signal is
// sent while the process is held at the point, then the process is
// killed; inside a transaction (which holds SQLite's write lock) the
// process is killed first and the signal sent before the restart.
var boundaryPoints = []struct {
	point   string
	inTxn   bool
	woke    bool // the signal finds the wait registered (else: the inbox)
	comment string
}{
	{"sqlite.OnRunPaused.before_commit", true, false, "paused + checkpoint + phase not yet committed"},
	{"engine.wait.after_paused", false, false, "paused committed, wait not registered: the signal goes to the inbox"},
	{"sqlite.RegisterWait.before_commit", true, false, "wait row not yet committed: no token may be out"},
	{"engine.wait.after_register", false, true, "wait registered, run still leased: the signal wakes the wait, ParkRun must queue"},
	{"engine.wait.before_notify", false, true, "wait registered, notify not sent yet"},
	{"sqlite.ParkRun.before_commit", true, true, "wait registered, lease not yet released"},
}

// TestCrashAtWaitCommitBoundaries (issue 5, Acceptance; the seed's
// wait-checkpoint-before-wake regression): a worker is held at each
// commit boundary of entering a durable wait, a signal is fired there
// (or right after the crash), the worker is SIGKILLed, and `starflow dev`
// takes over (sweep, retry). The signal is applied exactly once (one
// wake_received; from the inbox when it came before the wait existed), the
// resumed run completes with the signal's payload (so it never found an
// empty checkpoint), and no notify ever named a wait that was not
// committed.
func TestCrashAtWaitCommitBoundaries(t *testing.T) {
	t.Parallel()
	for _, bp := range boundaryPoints {
		t.Run(bp.point, func(t *testing.T) {
			t.Parallel()
			d := newLiteDeploy(t)
			rec := newNotifyRecorder(t, d.store)
			d.apply("boundary", fmt.Sprintf(boundaryWorkflow, rec.srv.URL))
			id := d.enqueue("boundary", map[string]any{})
			worker := d.startProc("worker", []string{"STARFLOW_FAULTPOINT=" + bp.point},
				"--lease-ttl", "2s", "--heartbeat", "500ms", "--poll-interval", "100ms")
			d.waitLogged(worker, "faultpoint "+bp.point+" reached", 60*time.Second)
			signal := func() string {
				return d.mustCLI("signal", id, "go", "--payload", `{"approved": true, "point": "`+bp.point+`"}`)
			}
			var out string
			if bp.inTxn {
				worker.kill(t)
				out = signal()
			} else {
				out = signal()
				worker.kill(t)
			}
			t.Logf("%s (%s): %s", bp.point, bp.comment, strings.TrimSpace(out))
			if want := map[bool]string{true: "woke wait", false: "held in the wake inbox"}[bp.woke]; !strings.Contains(out, want) {
				t.Errorf("starflow signal at %s said %q, want %q", bp.point, strings.TrimSpace(out), want)
			}

			d.startProc("dev", nil, "--lease-ttl", "2s", "--heartbeat", "500ms", "--poll-interval", "100ms", "--sweep-interval", "500ms")
			r := d.waitRunEnded(id, 90*time.Second)
			if r.status != "succeeded" {
				t.Fatalf("run %s after the crash at %s: %s (attempt %d)", id, bp.point, r.status, r.attempt)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(r.output), &got); err != nil || got["point"] != bp.point || got["approved"] != true {
				t.Errorf("output %s, want the signal's payload", r.output)
			}
			// Applied once: the attempt that completed received one wake. (A
			// signal that woke the wait of an attempt whose runner then died
			// before parking is handed to the next attempt through the inbox:
			// that attempt's wake_received says via "inbox".)
			final := d.count(`SELECT count(*) FROM workflow_run_events WHERE run_id = ? AND event_type = 'wake_received' AND attempt = ?`, id, r.attempt)
			all := d.events(id, "wake_received", "")
			if final != 1 || all > r.attempt {
				t.Errorf("%d wake_received events in the final attempt %d (want 1), %d in all\n%s", final, r.attempt, all, d.eventLog(id))
			}
			if n := d.count(`SELECT count(*) FROM workflow_wake_inbox`); n > 1 {
				t.Errorf("%d inbox rows for one signal\n%s", n, d.eventLog(id))
			}
			if n := d.events(id, "node_complete", "approve"); n != 1 {
				t.Errorf("wait step completed %d times, want 1", n)
			}
			if n := d.count(`SELECT count(*) FROM workflow_wake_inbox WHERE consumed_at IS NULL`); n != 0 {
				t.Errorf("%d inbox rows never consumed", n)
			}
			if n := d.count(`SELECT count(*) FROM workflow_waits WHERE run_id = ? AND status = 'pending'`, id); n != 0 {
				t.Errorf("%d waits still pending after the run succeeded", n)
			}
			rec.check(t)
			// Fired once: a second signal now finds the run ended.
			if again := d.cli("signal", id, "go", "--payload", `{}`); again.code == 0 {
				t.Errorf("a second signal after the run ended was accepted: %s", again.stdout)
			}
		})
	}
}
