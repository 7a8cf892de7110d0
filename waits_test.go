package starflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Durable waits end to end (issue 5) on a SQLite file, with real HTTP
// servers receiving notify requests.

// awaitRun polls the run until cond holds (generous deadline).
func awaitRun(t *testing.T, h *harness, runID string, what string, cond func(*starflowtype.Run) bool) *starflowtype.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := h.store.GetRun(context.Background(), &state.GetRunParams{ID: runID})
		if err != nil {
			t.Fatal(err)
		}
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never became %s: status %s, claim_state %s, error %q", runID, what, r.Status, r.ClaimState, r.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitParked waits until the run is paused and parked, and checks it
// holds no lease (SPEC §5: paused runs hold no lease).
func awaitParked(t *testing.T, h *harness, runID string) *starflowtype.Run {
	t.Helper()
	r := awaitRun(t, h, runID, "parked", func(r *starflowtype.Run) bool {
		return r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked
	})
	if r.LeasedBy != "" || !r.LeaseUntil.IsZero() {
		t.Fatalf("a parked run holds a lease: leased_by %q, lease_until %v", r.LeasedBy, r.LeaseUntil)
	}
	return r
}

// awaitEnd waits until the run settles and returns it.
func awaitEnd(t *testing.T, h *harness, runID string) *starflowtype.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.eng.WaitRun(ctx, runID)
	if err != nil {
		t.Fatalf("run %s did not end: %v", runID, err)
	}
	return r
}

func (h *harness) enqueue(name string, input any) *starflowtype.Run {
	h.t.Helper()
	r, err := h.eng.Enqueue(context.Background(), name, input, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) waits(runID string) []*starflowtype.Wait {
	h.t.Helper()
	ws, err := h.eng.Waits(context.Background(), runID)
	if err != nil {
		h.t.Fatal(err)
	}
	return ws
}

func jsonOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func countEvents(evs []*starflowtype.Event, typ starflowtype.EventType, node string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && (node == "" || e.NodeID == node) {
			n++
		}
	}
	return n
}

const signalDef = `name: sig
steps:
  - id: before
    context_set: {x: 1}
  - id: approve
    wait: {signal: go}
  - id: after
    context_set: {got: "${{ steps.approve.output.ok }}", x2: "${{ variables.x + 1 }}"}
output: "${{ variables }}"
`

func TestWaitSignalEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(signalDef)
	run := h.enqueue("sig", nil)
	parked := awaitParked(t, h, run.ID)

	snap := jsonOf(t, parked.Checkpoint)
	vars, _ := snap["variables"].(map[string]any)
	env, _ := vars["__celestialWait"].(map[string]any)
	if vars["x"] != 1.0 || env["step_id"] != "approve" || env["status"] != "pending" || env["signal"] != "go" {
		t.Fatalf("paused snapshot: %s", parked.Checkpoint)
	}
	ws := h.waits(run.ID)
	if len(ws) != 1 || ws[0].Status != starflowtype.WaitPending || ws[0].Kind != starflowtype.WaitSignal || ws[0].Signal != "go" || ws[0].StepID != "approve" {
		t.Fatalf("waits: %+v", ws)
	}
	if st := stepByID(h.steps(run.ID), "approve"); st == nil || st.Status != starflowtype.StepWaiting {
		t.Fatalf("approve step row: %+v", st)
	}
	// The sweep ignores a parked run.
	if swept, err := h.eng.Sweep(context.Background()); err != nil || len(swept) != 0 {
		t.Fatalf("sweep of a parked run: %v %v", swept, err)
	}
	awaitParked(t, h, run.ID)

	res, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{"ok": true}`))
	if err != nil || res.Wait == nil || res.Inbox != nil {
		t.Fatalf("signal: %+v %v", res, err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	out := jsonOf(t, end.Output)
	if out["got"] != true || out["x2"] != 2.0 {
		t.Fatalf("output: %s", end.Output)
	}
	if len(end.Checkpoint) != 0 {
		t.Errorf("checkpoint_json kept after the end: %s", end.Checkpoint)
	}
	evs := h.events(run.ID)
	if countEvents(evs, starflowtype.EventNodeStart, "before") != 1 || countEvents(evs, starflowtype.EventNodeComplete, "approve") != 1 {
		t.Errorf("a step ran twice, or the wait did not complete once: %v", eventTypes(evs))
	}
	for _, typ := range []starflowtype.EventType{starflowtype.EventRunPaused, starflowtype.EventWakeReceived, starflowtype.EventRunResumed} {
		if countEvents(evs, typ, "") != 1 {
			t.Errorf("want one %s: %v", typ, eventTypes(evs))
		}
	}
	if ws := h.waits(run.ID); ws[0].Status != starflowtype.WaitWoken || string(ws[0].Payload) == "" {
		t.Errorf("wait after: %+v", ws[0])
	}
}

func stepByID(steps []*starflowtype.Step, id string) *starflowtype.Step {
	for _, s := range steps {
		if s.StepID == id {
			return s
		}
	}
	return nil
}

// A signal sent right after enqueue, before the run reached its wait, is
// kept in the inbox and consumed when the wait registers.
func TestWaitSignalBeforeWaitGoesToInbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.apply(signalDef)
	run := h.enqueue("sig", nil)
	res, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{"ok": "early"}`))
	if err != nil || res.Inbox == nil || res.Wait != nil {
		t.Fatalf("early signal: %+v %v", res, err)
	}
	h.start()
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || jsonOf(t, end.Output)["got"] != "early" {
		t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
	}
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", nil); !errors.Is(err, starflowtype.ErrConflict) {
		t.Errorf("signal to an ended run: %v", err)
	}
	if _, err := h.eng.Signal(context.Background(), "00000000-0000-0000-0000-000000000000", "go", nil); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("signal to no run: %v", err)
	}
	if _, err := h.eng.Signal(context.Background(), run.ID, "go", json.RawMessage(`{nope`)); err == nil {
		t.Error("invalid JSON payload accepted")
	}
}

func TestWaitTimerUntilAndTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Maintenance: true, WaitMaintenance: starflow.WaitMaintenanceConfig{TimerInterval: 50 * time.Millisecond}})
	h.start()
	h.apply(`name: timers
steps:
  - id: nap
    wait: {timer: 300ms}
  - id: alarm
    wait: {until: "${{ input.at }}"}
  - id: answer
    wait: {signal: never, timeout: 300ms}
  - id: late
    when: "${{ steps.answer.output.timed_out }}"
    context_set: {late: true}
output: "${{ {'nap': has(steps.nap.output.fired_at), 'alarm': has(steps.alarm.output.fired_at), 'answer': steps.answer.output, 'late': variables.late} }}"
`)
	at := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	start := time.Now()
	run := h.enqueue("timers", map[string]any{"at": at})
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.Error)
	}
	out := jsonOf(t, end.Output)
	ans, _ := out["answer"].(map[string]any)
	if out["nap"] != true || out["alarm"] != true || ans["timed_out"] != true || out["late"] != true {
		t.Fatalf("output: %s", end.Output)
	}
	if time.Since(start) < time.Second {
		t.Errorf("the until wait woke before its time")
	}
	ws := h.waits(run.ID)
	if len(ws) != 3 || ws[0].Status != starflowtype.WaitWoken || ws[1].Status != starflowtype.WaitWoken || ws[2].Status != starflowtype.WaitTimedOut {
		t.Fatalf("waits: %+v %+v %+v", ws[0], ws[1], ws[2])
	}
	if ws[0].Kind != starflowtype.WaitTimer || ws[1].WakeAt.IsZero() || ws[2].ExpiresAt.IsZero() {
		t.Errorf("wait rows: %+v", ws)
	}
	// The timer poller's wakes are counted: two timers, one timeout.
	wakes := map[string]float64{}
	mfs, err := h.eng.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "starflow_wakes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var via, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "via":
					via = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			wakes[via+"/"+outcome] = m.GetCounter().GetValue()
		}
	}
	if wakes["timer/woken"] != 2 || wakes["timer/timed_out"] != 1 {
		t.Errorf("starflow_wakes_total: %v, want timer/woken 2 and timer/timed_out 1", wakes)
	}
}

// notifySink is an approval app: it records every notify request and
// checks, when each arrives, that its wait row already exists in the
// database (the token is never delivered before the wait is registered).
type notifySink struct {
	t     *testing.T
	store state.Adapter
	mu    sync.Mutex
	got   []map[string]any
	hdr   []http.Header
	early []string
	fail  int // answer 503 to this many requests first
	ch    chan map[string]any
}

func newNotifySink(t *testing.T, store state.Adapter) (*notifySink, *httptest.Server) {
	s := &notifySink{t: t, store: store, ch: make(chan map[string]any, 16)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *notifySink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	id, _ := m["wait_id"].(string)
	wt, err := s.store.GetWait(r.Context(), &state.GetWaitParams{ID: id})
	s.mu.Lock()
	if err != nil || wt == nil {
		s.early = append(s.early, id)
	}
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.got = append(s.got, m)
	s.hdr = append(s.hdr, r.Header.Clone())
	s.mu.Unlock()
	s.ch <- m
}

func (s *notifySink) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-s.ch:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no notify request arrived")
		return nil
	}
}

func (s *notifySink) checkNoneEarly(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.early) > 0 {
		t.Fatalf("notify arrived before its wait row existed: %v", s.early)
	}
}

func approvalDef(url string) string {
	return `name: approve
secrets: [HOOK_TOKEN]
steps:
  - id: review
    wait:
      approval:
        form: {amount: "${{ input.amount }}"}
      timeout: 1h
      notify:
        url: ` + url + `
        headers: {Authorization: "${{ 'Bearer ' + secrets.HOOK_TOKEN }}"}
        body: {order: "${{ input.order }}", run_id: spoofed}
  - id: done
    context_set: {approved: "${{ steps.review.output.approved }}"}
output: "${{ variables.approved }}"
`
}

func hookSecrets(_ context.Context, name string) (string, error) {
	if name == "HOOK_TOKEN" {
		return "hook-secret-value", nil
	}
	return "", errors.New("no such secret")
}

func TestWaitApprovalWokenByNotifiedToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{Secrets: hookSecrets, WakeURL: "https://starflow.example.com/wake/{token}"})
	sink, srv := newNotifySink(t, h.store)
	h.start()
	h.apply(approvalDef(srv.URL + "/hooks"))
	run := h.enqueue("approve", map[string]any{"amount": 120, "order": "o-7"})
	m := sink.next(t)
	sink.checkNoneEarly(t)
	token, _ := m["token"].(string)
	if m["run_id"] != run.ID || m["signal"] != "review" || m["order"] != "o-7" || token == "" ||
		m["wake_url"] != "https://starflow.example.com/wake/"+token || m["expires_at"] == nil {
		t.Fatalf("notify body: %v", m)
	}
	if form, _ := m["form"].(map[string]any); form["amount"] != 120.0 {
		t.Fatalf("notify form: %v", m["form"])
	}
	if got := sink.hdr[0].Get("Authorization"); got != "Bearer hook-secret-value" {
		t.Errorf("inline notify header: %q", got)
	}
	awaitParked(t, h, run.ID)
	ws := h.waits(run.ID)
	if len(ws) != 1 || ws[0].Kind != starflowtype.WaitApproval || ws[0].TokenHash == "" || ws[0].NotifiedAt.IsZero() ||
		strings.Contains(string(ws[0].Notify), "hook-secret-value") || strings.Contains(ws[0].TokenHash, token) {
		t.Fatalf("wait row: %+v (notify %s)", ws[0], ws[0].Notify)
	}

	w, err := h.eng.Wake(context.Background(), token, json.RawMessage(`{"approved": true, "by": "ann"}`))
	if err != nil || w.Status != starflowtype.WaitWoken {
		t.Fatalf("wake: %+v %v", w, err)
	}
	end := awaitEnd(t, h, run.ID)
	if end.Status != starflowtype.RunSucceeded || string(end.Output) != "true" {
		t.Fatalf("run %s %s: %s", end.Status, end.Error, end.Output)
	}
	// Used: refused, nothing changes.
	if _, err := h.eng.Wake(context.Background(), token, nil); !errors.Is(err, starflowtype.ErrWaitClosed) {
		t.Errorf("used token: %v", err)
	}
}

// DeliverNotify (the maintenance pass's delivery) re-creates a token that
// wakes the wait.
func TestWaitDeliverNotifyRecreatesToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	sink, srv := newNotifySink(t, h.store)
	sink.fail = 3 // every inline try fails
	h.start()
	h.apply(`name: retry
steps:
  - id: w
    wait: {signal: go, notify: {url: "` + srv.URL + `"}}
`)
	run := h.enqueue("retry", nil)
	awaitParked(t, h, run.ID)
	ws := h.waits(run.ID)
	if len(ws) != 1 || !ws[0].NotifiedAt.IsZero() || ws[0].NotifyTries != 1 {
		t.Fatalf("after failed inline tries: %+v", ws[0])
	}
	if err := h.eng.DeliverNotify(context.Background(), ws[0]); err != nil {
		t.Fatal(err)
	}
	m := sink.next(t)
	if _, err := h.eng.Wake(context.Background(), m["token"].(string), json.RawMessage(`"late"`)); err != nil {
		t.Fatal(err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != `"late"` {
		t.Fatalf("run %s: %s", end.Status, end.Output)
	}
}

func TestWaitApprovalWokenBySignal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{})
	h.start()
	h.apply(`name: approve2
steps:
  - id: review
    wait: {approval: {}}
  - id: mgr
    wait: {approval: {signal: manager}}
output: "${{ [steps.review.output, steps.mgr.output] }}"
`)
	run := h.enqueue("approve2", nil)
	awaitParked(t, h, run.ID)
	if _, err := h.eng.Signal(context.Background(), run.ID, "review", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	awaitRun(t, h, run.ID, "parked at mgr", func(r *starflowtype.Run) bool {
		return r.ClaimState == starflowtype.ClaimParked && len(h.waits(run.ID)) == 2
	})
	if _, err := h.eng.Signal(context.Background(), run.ID, "manager", json.RawMessage(`2`)); err != nil {
		t.Fatal(err)
	}
	if end := awaitEnd(t, h, run.ID); end.Status != starflowtype.RunSucceeded || string(end.Output) != "[1,2]" {
		t.Fatalf("run %s: %s", end.Status, end.Output)
	}
}
