package statetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testDurability: what was committed is all there after the adapter is
// closed and the storage opened again, leases included; Migrate is
// idempotent.
func (s *suite) testDurability(t *testing.T) {
	t.Parallel()

	t.Run("MigrateIdempotent", func(t *testing.T) {
		t.Parallel()
		h := s.adapter(t)
		r := h.enqueue(nil)
		for i := range 2 {
			if err := h.a.Migrate(h.ctx()); err != nil {
				t.Fatalf("Migrate #%d on a migrated adapter: %v", i+1, err)
			}
		}
		equal(t, "run after Migrate", h.getRun(r.ID).ID, r.ID)
	})

	t.Run("Reopen", func(t *testing.T) {
		t.Parallel()
		if s.opts.Reopen == nil {
			t.Skip("statetest: Options.Reopen is not set, so the suite cannot close and reopen the same storage")
		}
		h := s.stored(t)

		def, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{Name: "orders", Revision: "r1", Spec: json.RawMessage(`{"steps":[]}`), Source: "name: orders"})
		if err != nil {
			t.Fatal(err)
		}
		run, l := h.started(&state.EnqueueRunParams{WorkflowName: "orders", DefinitionID: def.ID, Input: json.RawMessage(`{"sku":"A1"}`)}, runnerA)
		h.runStep(stepKey(run, "", "reserve"), l, `{"id":"r-1"}`, `{"reservation":"r-1"}`)
		h.runStep(stepKey(run, "ship.item_0", "label"), l, `"L-1"`, `{}`)
		if err := h.a.RecordPhaseIfChanged(h.ctx(), &state.RecordPhaseParams{RunID: run.ID, Lease: l, Phase: "shipping"}); err != nil {
			t.Fatal(err)
		}
		done, ld := h.started(nil, runnerB)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: done.ID, Lease: ld, Output: json.RawMessage(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
		queued := h.enqueue(&state.EnqueueRunParams{Delay: time.Hour})
		before := map[string]snapshot{}
		for _, id := range []string{run.ID, done.ID, queued.ID} {
			before[id] = h.snapshot(id)
		}

		h2 := &harness{t: t, a: s.opts.Reopen(t, h.a, nil)}
		h2.caps = h2.a.Capabilities()
		if err := h2.a.Migrate(h2.ctx()); err != nil {
			t.Fatalf("Migrate after reopening: %v", err)
		}
		for id, snap := range before {
			sameSnapshot(t, "closing and reopening", snap, h2.snapshot(id))
		}
		got, err := h2.a.GetDefinition(h2.ctx(), &state.GetDefinitionParams{Name: "orders", Revision: "r1"})
		if err != nil {
			t.Fatalf("GetDefinition after reopening: %v", err)
		}
		if !reflect.DeepEqual(got, def) {
			t.Errorf("definition after reopening = %+v, want %+v", got, def)
		}

		// The lease survived the restart: the runner carries on.
		if _, err := h2.a.RefreshLease(h2.ctx(), &state.RefreshLeaseParams{RunID: run.ID, Lease: l, LeaseTTL: leaseTTL}); err != nil {
			t.Fatalf("RefreshLease after reopening: %v", err)
		}
		mark := before[run.ID].Events[len(before[run.ID].Events)-1].ID
		h2.runStep(stepKey(run, "", "charge"), l, `1`, `{}`)
		evs := h2.eventsAfter(run.ID, mark)
		wantEventTypes(t, evs, starflowtype.EventNodeStart, starflowtype.EventNodeComplete)
		if _, err := h2.a.OnRunComplete(h2.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatalf("OnRunComplete after reopening: %v", err)
		}
		equal(t, "checkpoints", len(h2.checkpoints(run.ID, 0)), 3)
		if c := h2.claim(runnerA); c != nil {
			t.Errorf("claimed %s after reopening; the only queued run is delayed by an hour", c.ID)
		}
	})
}
