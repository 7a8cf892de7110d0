package starflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Wake tokens that are forged, expired, used, or of another run are
// refused with a clear error, and change nothing.
func TestWakeRefusesBadTokens(t *testing.T) {
	t.Parallel()
	key := waketoken.Key{ID: "k2", Secret: bytes.Repeat([]byte{7}, 32)}
	old := waketoken.Key{ID: "k1", Secret: bytes.Repeat([]byte{3}, 32)}
	ring := "k2:" + base64.StdEncoding.EncodeToString(key.Secret) + ",k1:" + base64.StdEncoding.EncodeToString(old.Secret)
	h := newHarness(t, starflow.Config{WakeKeys: ring})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(`name: tok
steps:
  - id: w
    wait: {signal: go, timeout: 1h, notify: {url: "` + srv.URL + `"}}
`)
	run := h.enqueue("tok", nil)
	other := h.enqueue("tok", nil)
	m := sink.next(t)
	sink.next(t)
	if m["run_id"] != run.ID {
		run, other = other, run
	}
	token := m["token"].(string)
	waitID := m["wait_id"].(string)
	awaitParked(t, h, run.ID)
	awaitParked(t, h, other.ID)
	if c, err := waketoken.Verify([]waketoken.Key{key}, token, time.Now()); err != nil || c.KeyID != "k2" || c.WaitID != waitID {
		t.Fatalf("the token is not signed by the first configured key: %+v %v", c, err)
	}
	before := h.events(run.ID)

	forged := waketoken.Sign(waketoken.Key{ID: "k2", Secret: bytes.Repeat([]byte{8}, 32)}, run.ID, waitID, time.Now().Add(time.Hour))
	expired := waketoken.Sign(key, run.ID, waitID, time.Now().Add(-time.Second))
	unknownKey := waketoken.Sign(waketoken.Key{ID: "k9", Secret: key.Secret}, run.ID, waitID, time.Now().Add(time.Hour))
	rotated := waketoken.Sign(old, run.ID, waitID, time.Now().Add(time.Hour)) // verifies, but is not the wait's token
	for name, c := range map[string]struct {
		tok  string
		want error
	}{
		"forged":        {forged, starflowtype.ErrTokenInvalid},
		"tampered":      {token[:len(token)-3] + "AAA", starflowtype.ErrTokenInvalid},
		"garbage":       {"not-a-token", starflowtype.ErrTokenInvalid},
		"unknown key":   {unknownKey, starflowtype.ErrTokenInvalid},
		"expired":       {expired, starflowtype.ErrWaitClosed},
		"another token": {rotated, starflowtype.ErrNotFound},
	} {
		if _, err := h.eng.Wake(context.Background(), c.tok, json.RawMessage(`1`)); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
	if _, err := h.eng.WakeRun(context.Background(), other.ID, token, nil); !errors.Is(err, starflowtype.ErrTokenInvalid) || !strings.Contains(err.Error(), "another run") {
		t.Errorf("wrong run: %v", err)
	}
	if _, err := h.eng.Wake(context.Background(), token, json.RawMessage(`{bad`)); err == nil {
		t.Error("a payload that is not JSON was accepted")
	}
	// Nothing changed.
	if ws := h.waits(run.ID); ws[0].Status != starflowtype.WaitPending {
		t.Fatalf("a refused wake changed the wait: %+v", ws[0])
	}
	if r := awaitParked(t, h, run.ID); len(h.events(r.ID)) != len(before) {
		t.Fatalf("a refused wake wrote events: %v", eventTypes(h.events(run.ID)))
	}

	if _, err := h.eng.WakeRun(context.Background(), run.ID, token, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Wake(context.Background(), token, json.RawMessage(`"again"`)); !errors.Is(err, starflowtype.ErrWaitClosed) {
		t.Errorf("used token: %v", err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `"ok"` {
		t.Fatalf("run %s: %s", end.Status, end.Output)
	}
	if countEvents(h.events(run.ID), starflowtype.EventWakeReceived, "") != 1 {
		t.Errorf("wake_received: %v", eventTypes(h.events(run.ID)))
	}
	if ws := h.waits(other.ID); ws[0].Status != starflowtype.WaitPending {
		t.Errorf("the other run's wait changed: %+v", ws[0])
	}
}

// Without configured keys, a key is generated once in the key file beside
// the SQLite database (mode 0600); the store registers only its id and
// fingerprint; another engine on the same database verifies the first
// one's tokens.
func TestWakeKeysSharedThroughTheKeyFile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(`name: shared
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
`)
	run := h.enqueue("shared", nil)
	token := sink.next(t)["token"].(string)
	keys, err := h.store.WakeKeys(context.Background())
	if err != nil || len(keys) != 1 {
		t.Fatalf("stored keys: %v %v", keys, err)
	}
	file := h.store.Capabilities().WakeKeyFile
	inFile, err := waketoken.ReadKeyFile(file, nil)
	if err != nil || len(inFile) != 1 || inFile[0].ID != keys[0].ID || keys[0].Fingerprint != waketoken.Fingerprint(inFile[0]) {
		t.Fatalf("key file %s holds %v (%v); the store registered %+v", file, inFile, err, keys)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	second, err := starflow.New(starflow.Config{Store: h.store, NoRunner: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	awaitParked(t, h, run.ID)
	if _, err := second.Wake(context.Background(), token, json.RawMessage(`7`)); err != nil {
		t.Fatalf("a second engine on the same store: %v", err)
	}
	if end := awaitEnd(t, h, run.ID); string(end.Output) != "7" {
		t.Fatalf("run %s: %s", end.Status, end.Output)
	}
	if keys, _ := h.store.WakeKeys(context.Background()); len(keys) != 1 {
		t.Errorf("keys generated twice: %d", len(keys))
	}
}

const childDefs = `name: child
input_schema: {type: object, required: [n]}
steps:
  - id: maybe_fail
    when: "${{ input.n < 0 }}"
    fail: {message: "negative: ${{ input.n }}"}
  - id: hold
    when: "${{ input.n == 0 }}"
    wait: {signal: release}
  - id: double
    context_set: {d: "${{ input.n * 2 }}"}
output: "${{ {'doubled': variables.d} }}"
`

const parentDef = `name: parent
steps:
  - id: call
    workflow_call: {workflow: child, input: {n: "${{ input.n }}"}}
  - id: after
    context_set: {got: "${{ steps.call.output.doubled }}"}
output: "${{ variables.got }}"
`

func childOf(t *testing.T, h *harness, parentID string) *starflowtype.Run {
	t.Helper()
	var found *starflowtype.Run
	awaitRun(t, h, parentID, "with a child", func(*starflowtype.Run) bool {
		runs, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{WorkflowName: "child", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ParentRunID == parentID {
				found = r
			}
		}
		return found != nil
	})
	return found
}

func TestWorkflowCallChildOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": 21})
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "42" {
		t.Fatalf("parent %s %s: %s", end.Status, end.Error, end.Output)
	}
	child := childOf(t, h, run.ID)
	if child.TriggerType != starflowtype.TriggerChild || child.Status != starflowtype.RunSucceeded || child.IdempotencyKey == "" {
		t.Fatalf("child: %+v", child)
	}
	ws := h.waits(run.ID)
	if len(ws) != 1 || ws[0].Kind != starflowtype.WaitChild || ws[0].CorrelationKey != child.ID || ws[0].Status != starflowtype.WaitWoken {
		t.Fatalf("parent's wait: %+v", ws)
	}
	if len(h.steps(child.ID)) == 0 || countEvents(h.events(child.ID), starflowtype.EventRunSucceeded, "") != 1 {
		t.Error("the child has no ledger of its own")
	}
}

func TestWorkflowCallChildFailureFailsStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": -1})
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunFailed || !strings.Contains(end.Error, "negative: -1") || !strings.Contains(end.Error, "child run") {
		t.Fatalf("parent %s: %q", end.Status, end.Error)
	}
	if end.Attempt != 1 {
		t.Errorf("a child's failure is permanent for the parent step; attempts: %d", end.Attempt)
	}
	if st := stepByID(h.steps(run.ID), "call"); st == nil || st.Status != starflowtype.StepFailed {
		t.Errorf("call step: %+v", st)
	}
	// An input the child's input_schema refuses fails the step before any child starts.
	h.apply(`name: parent2
steps:
  - id: call
    workflow_call: {workflow: child, input: {m: 1}}
`)
	bad := h.enqueue("parent2", nil)
	if end := awaitEnd(t, h, bad.ID); end.Status != starflowtype.RunFailed || !strings.Contains(end.Error, "input_schema") {
		t.Fatalf("bad child input: %s %q", end.Status, end.Error)
	}
}

func TestCancelParentCancelsChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(childDefs)
	h.apply(parentDef)
	run := h.enqueue("parent", map[string]any{"n": 0}) // the child holds at its wait
	child := childOf(t, h, run.ID)
	awaitParked(t, h, child.ID)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Cancel(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	awaitRun(t, h, child.ID, "cancelled", func(r *starflowtype.Run) bool { return r.Status == starflowtype.RunCancelled })
	if r := awaitEnd(t, h, run.ID); r.Status != starflowtype.RunCancelled {
		t.Fatalf("parent: %s", r.Status)
	}
}

func TestSessionVariables(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: writer
steps:
  - id: tmp
    session_write: {session: "${{ input.user }}", key: scratch, value: {n: 1}}
  - id: keep
    session_write: {session: "${{ input.user }}", key: cart, value: [1, 2.5], keep_until: 1h}
  - id: brief
    session_write: {session: "${{ input.user }}", key: brief, value: x, keep_until: "${{ input.soon }}"}
  - id: read_tmp
    session_read: {session: "${{ input.user }}", key: scratch}
  - id: missing
    session_read: {session: "${{ input.user }}", key: nope, default: {empty: true}}
output: "${{ [steps.read_tmp.output, steps.missing.output, steps.keep.output] }}"
`)
	h.apply(`name: reader
steps:
  - id: cart
    session_read: {session: "${{ input.user }}", key: cart}
  - id: scratch
    session_read: {session: "${{ input.user }}", key: scratch}
  - id: brief
    session_read: {session: "${{ input.user }}", key: brief, default: gone}
output: "${{ [steps.cart.output, steps.scratch.output, steps.brief.output] }}"
`)
	soon := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	w := h.enqueue("writer", map[string]any{"user": "u1", "soon": soon})
	end := awaitEnd(t, h, w.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != `[{"n":1},{"empty":true},[1,2.5]]` {
		t.Fatalf("writer %s %s: %s", end.Status, end.Error, end.Output)
	}
	if _, err := h.store.SessionGet(context.Background(), &state.SessionGetParams{WorkspaceID: "default", SessionID: "u1", Key: "scratch"}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("a variable written without keep_until survived its run: %v", err)
	}
	time.Sleep(400 * time.Millisecond) // brief's keep_until passes
	r := h.enqueue("reader", map[string]any{"user": "u1"})
	end = awaitEnd(t, h, r.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != `[[1,2.5],null,"gone"]` {
		t.Fatalf("reader %s %s: %s", end.Status, end.Error, end.Output)
	}
	n, err := h.store.DeleteExpiredSessionVars(context.Background(), &state.DeleteExpiredSessionVarsParams{})
	if err != nil || n != 1 {
		t.Fatalf("GC removed %d (%v), want the expired one", n, err)
	}
	if v, err := h.store.SessionGet(context.Background(), &state.SessionGetParams{WorkspaceID: "default", SessionID: "u1", Key: "cart"}); err != nil || v.OriginRunID != w.ID || v.KeepUntil.IsZero() {
		t.Fatalf("kept variable: %+v %v", v, err)
	}
}

// 64 concurrent wakes with the same token: exactly one applies, the others
// get ErrWaitClosed.
func TestWakeConcurrentSameToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(`name: race
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
`)
	run := h.enqueue("race", nil)
	token := sink.next(t)["token"].(string)
	awaitParked(t, h, run.ID)
	const n = 64
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			_, err := h.eng.Wake(context.Background(), token, json.RawMessage(fmt.Sprint(i)))
			errs <- err
		}()
	}
	close(start)
	ok, closed := 0, 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, starflowtype.ErrWaitClosed):
			closed++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || closed != n-1 {
		t.Fatalf("%d wakes applied, %d refused as closed; want 1 and %d", ok, closed, n-1)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || countEvents(h.events(run.ID), starflowtype.EventWakeReceived, "") != 1 {
		t.Fatalf("run %s: %v", end.Status, eventTypes(h.events(run.ID)))
	}
}
