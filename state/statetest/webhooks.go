package statetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testWebhooks: state.Webhooks keeps a generation per (workspace,
// workflow) that every enable bumps, a disable keeps, and nothing else
// shares; and EnqueueRun records QueuedPayload on run_queued.
func (s *suite) testWebhooks(t *testing.T) {
	t.Parallel()
	t.Run("Generations", s.testWebhookGenerations)
	t.Run("ConcurrentEnables", s.testWebhookConcurrentEnables)
	t.Run("QueuedPayload", s.testQueuedPayload)
}

func (s *suite) testWebhookGenerations(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	name := &state.GetWebhookParams{WorkspaceID: "ws1", WorkflowName: "orders"}
	if _, err := h.a.GetWebhook(h.ctx(), name); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("GetWebhook before any enable: %v, want ErrNotFound", err)
	}
	if _, err := h.a.DisableWebhook(h.ctx(), &state.DisableWebhookParams{WorkspaceID: "ws1", WorkflowName: "orders"}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("DisableWebhook before any enable: %v, want ErrNotFound", err)
	}
	enable := func(ws, wf, key string) *state.Webhook {
		t.Helper()
		w, err := h.a.EnableWebhook(h.ctx(), &state.EnableWebhookParams{WorkspaceID: ws, WorkflowName: wf, KeyID: key})
		if err != nil {
			t.Fatalf("EnableWebhook(%s/%s): %v", ws, wf, err)
		}
		return w
	}
	first := enable("ws1", "orders", "k1")
	equal(t, "first generation", first.Generation, int64(1))
	equal(t, "first enabled", first.Enabled, true)
	equal(t, "first key", first.KeyID, "k1")
	equal(t, "workspace", first.WorkspaceID, "ws1")
	equal(t, "workflow", first.WorkflowName, "orders")
	if first.CreatedAt.IsZero() || first.UpdatedAt.IsZero() {
		t.Errorf("created_at %v / updated_at %v: want both set", first.CreatedAt, first.UpdatedAt)
	}

	// Another workspace's, and another workflow's, webhooks are their own.
	equal(t, "another workspace's first generation", enable("ws2", "orders", "k1").Generation, int64(1))
	equal(t, "another workflow's first generation", enable("ws1", "invoices", "k1").Generation, int64(1))

	rotated := enable("ws1", "orders", "k2")
	equal(t, "rotated generation", rotated.Generation, int64(2))
	equal(t, "rotated key", rotated.KeyID, "k2")
	if !rotated.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("rotation moved created_at from %v to %v", first.CreatedAt, rotated.CreatedAt)
	}

	got, err := h.a.GetWebhook(h.ctx(), name)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "read generation", got.Generation, int64(2))
	equal(t, "read enabled", got.Enabled, true)

	off, err := h.a.DisableWebhook(h.ctx(), &state.DisableWebhookParams{WorkspaceID: "ws1", WorkflowName: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "disabled", off.Enabled, false)
	equal(t, "disabled keeps its generation", off.Generation, int64(2))
	if _, err := h.a.DisableWebhook(h.ctx(), &state.DisableWebhookParams{WorkspaceID: "ws1", WorkflowName: "orders"}); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Errorf("disabling twice: %v, want ErrNotFound", err)
	}
	if got, err = h.a.GetWebhook(h.ctx(), name); err != nil || got.Enabled || got.Generation != 2 {
		t.Errorf("after disable: %+v, %v; want generation 2, disabled", got, err)
	}
	equal(t, "enabled again: a new generation", enable("ws1", "orders", "k2").Generation, int64(3))
	if got, err := h.a.GetWebhook(h.ctx(), &state.GetWebhookParams{WorkspaceID: "ws2", WorkflowName: "orders"}); err != nil || got.Generation != 1 || !got.Enabled {
		t.Errorf("ws2's webhook after ws1's changes: %+v, %v; want generation 1, enabled", got, err)
	}

	for _, p := range []*state.EnableWebhookParams{
		{WorkflowName: "orders", KeyID: "k1"}, {WorkspaceID: "ws1", KeyID: "k1"}, {WorkspaceID: "ws1", WorkflowName: "orders"},
	} {
		if _, err := h.a.EnableWebhook(h.ctx(), p); !errors.Is(err, starflowtype.ErrInvalid) {
			t.Errorf("EnableWebhook(%+v): %v, want ErrInvalid", p, err)
		}
	}
}

// testWebhookConcurrentEnables: concurrent rotations each get a
// generation of their own (no two callers are handed the same secret
// while the row holds another).
func (s *suite) testWebhookConcurrentEnables(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	const callers = 16
	var wg sync.WaitGroup
	gens := make([]int64, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := h.a.EnableWebhook(h.ctx(), &state.EnableWebhookParams{WorkspaceID: "ws", WorkflowName: "wf", KeyID: "k1"})
			if err == nil {
				gens[i] = w.Generation
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("concurrent enable %d: %v", i, errs[i])
		}
		if seen[gens[i]] {
			t.Fatalf("two concurrent enables got generation %d", gens[i])
		}
		seen[gens[i]] = true
	}
	w, err := h.a.GetWebhook(h.ctx(), &state.GetWebhookParams{WorkspaceID: "ws", WorkflowName: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "generation after the burst", w.Generation, int64(callers))
}

// testQueuedPayload: EnqueueRun writes QueuedPayload as the run_queued
// event's payload, and none without it.
func (s *suite) testQueuedPayload(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	with := h.enqueue(&state.EnqueueRunParams{ID: uuid.NewString(), QueuedPayload: json.RawMessage(`{"webhook": {"generation": 2}}`)})
	without := h.enqueue(&state.EnqueueRunParams{ID: uuid.NewString()})
	for _, c := range []struct {
		run  *starflowtype.Run
		want string
	}{{with, `{"webhook":{"generation":2}}`}, {without, ""}} {
		evs := h.events(c.run.ID)
		if len(evs) != 1 || evs[0].Type != starflowtype.EventRunQueued {
			t.Fatalf("run %s: events %v, want one run_queued", c.run.ID, evs)
		}
		got := ""
		if len(evs[0].Payload) > 0 && string(evs[0].Payload) != "null" {
			var v any
			if err := json.Unmarshal(evs[0].Payload, &v); err != nil {
				t.Fatalf("run_queued payload %s: %v", evs[0].Payload, err)
			}
			b, _ := json.Marshal(v)
			got = string(b)
		}
		equal(t, "run_queued payload", got, c.want)
	}
}
