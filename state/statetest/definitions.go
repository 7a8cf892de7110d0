package statetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testDefinitions: PutDefinition is idempotent by (workspace, name,
// revision); GetDefinition finds by id, by revision and the latest; misses
// are ErrNotFound.
func (s *suite) testDefinitions(t *testing.T) {
	t.Parallel()

	put := func(h *harness, ws, name, rev, spec string) *starflowtype.Definition {
		t := h.t
		t.Helper()
		d, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{
			WorkspaceID: ws, Name: name, Revision: rev, Spec: json.RawMessage(spec), Source: "name: " + name + "\n",
		})
		if err != nil {
			t.Fatalf("PutDefinition(%s@%s): %v", name, rev, err)
		}
		return d
	}

	t.Run("PutIsIdempotent", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		d1 := put(h, "", "orders", "rev1", `{"name":"orders","steps":[]}`)
		if d1.ID == "" {
			t.Fatal("PutDefinition returned no id")
		}
		equal(t, "workspace", d1.WorkspaceID, state.DefaultWorkspace)
		equal(t, "name", d1.Name, "orders")
		equal(t, "revision", d1.Revision, "rev1")
		equal(t, "source", d1.Source, "name: orders\n")
		jsonEqual(t, "spec", d1.Spec, `{"name":"orders","steps":[]}`)
		if d1.CreatedAt.IsZero() {
			t.Error("created_at is not set")
		}

		d2 := put(h, state.DefaultWorkspace, "orders", "rev1", `{"name":"orders","steps":[]}`)
		equal(t, "id of the second put of the same revision", d2.ID, d1.ID)

		other := put(h, "", "orders", "rev2", `{"name":"orders","steps":[{"id":"a"}]}`)
		if other.ID == d1.ID {
			t.Error("a new revision got the id of the old one")
		}
		elsewhere := put(h, "acme", "orders", "rev1", `{"name":"orders","steps":[]}`)
		if elsewhere.ID == d1.ID {
			t.Error("the same revision in another workspace got the same id")
		}
		equal(t, "workspace of the other put", elsewhere.WorkspaceID, "acme")
	})

	t.Run("Get", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		d1 := put(h, "", "orders", "rev1", `{"v":1}`)
		d2 := put(h, "", "orders", "rev2", `{"v":2}`)
		put(h, "", "billing", "rev9", `{"v":9}`)
		acme := put(h, "acme", "orders", "rev3", `{"v":3}`)

		get := func(p *state.GetDefinitionParams) *starflowtype.Definition {
			t.Helper()
			d, err := h.a.GetDefinition(h.ctx(), p)
			if err != nil {
				t.Fatalf("GetDefinition(%+v): %v", p, err)
			}
			return d
		}
		equal(t, "by id", get(&state.GetDefinitionParams{ID: d1.ID}).Revision, "rev1")
		equal(t, "by id in its workspace", get(&state.GetDefinitionParams{ID: d1.ID, WorkspaceID: state.DefaultWorkspace}).ID, d1.ID)
		byRev := get(&state.GetDefinitionParams{Name: "orders", Revision: "rev1"})
		equal(t, "by revision", byRev.ID, d1.ID)
		jsonEqual(t, "spec by revision", byRev.Spec, `{"v":1}`)
		equal(t, "latest", get(&state.GetDefinitionParams{Name: "orders"}).ID, d2.ID)
		equal(t, "latest in acme", get(&state.GetDefinitionParams{WorkspaceID: "acme", Name: "orders"}).ID, acme.ID)
		// Re-applying an older revision makes it current again (a rollback).
		time.Sleep(2 * time.Millisecond) // timestamps have millisecond precision
		again := put(h, "", "orders", "rev1", `{"v":1}`)
		equal(t, "re-applied keeps its id", again.ID, d1.ID)
		equal(t, "latest after re-applying rev1", get(&state.GetDefinitionParams{Name: "orders"}).ID, d1.ID)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		h := s.adapter(t)
		put(h, "", "orders", "rev1", `{}`)
		for _, p := range []*state.GetDefinitionParams{
			{ID: "00000000-0000-0000-0000-000000000000"},
			{Name: "nope"},
			{Name: "orders", Revision: "nope"},
			{WorkspaceID: "acme", Name: "orders"},
			{WorkspaceID: "acme", Name: "orders", Revision: "rev1"},
		} {
			d, err := h.a.GetDefinition(h.ctx(), p)
			wantErrIs(t, "GetDefinition("+dump(p)+")", err, starflowtype.ErrNotFound)
			if d != nil {
				t.Errorf("GetDefinition(%+v) returned %+v with the error", p, d)
			}
		}
		d := put(h, "", "billing", "r", `{}`)
		_, err := h.a.GetDefinition(h.ctx(), &state.GetDefinitionParams{ID: d.ID, WorkspaceID: "acme"})
		wantErrIs(t, "GetDefinition by id from another workspace", err, starflowtype.ErrNotFound)
	})
}

// testEnqueue: EnqueueRun's defaults, explicit values and run_queued event.
func (s *suite) testEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders", WorkflowRevision: "rev1"})
		got := h.getRun(r.ID)
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"status", got.Status, starflowtype.RunQueued},
			{"claim_state", got.ClaimState, starflowtype.ClaimQueued},
			{"attempt", got.Attempt, 1},
			{"max_attempts", got.MaxAttempts, 3},
			{"recovery_mode", got.RecoveryMode, starflowtype.RecoveryReplay},
			{"workspace_id", got.WorkspaceID, state.DefaultWorkspace},
			{"env", got.Env, state.DefaultEnv},
			{"workflow_name", got.WorkflowName, "orders"},
			{"workflow_revision", got.WorkflowRevision, "rev1"},
			{"template_id", got.TemplateID, "orders"},
			{"runner_pool", got.RunnerPool, ""},
			{"priority", got.Priority, 0},
			{"lease_epoch", got.LeaseEpoch, int64(0)},
			{"claim_attempts", got.ClaimAttempts, 0},
			{"leased_by", got.LeasedBy, ""},
			{"dead_lettered", got.DeadLettered, false},
			{"cancel_requested", got.CancelRequested, false},
		} {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
			}
		}
		if got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() {
			t.Errorf("created_at %v / updated_at %v not set", got.CreatedAt, got.UpdatedAt)
		}
		near(t, "available_at", got.AvailableAt, got.CreatedAt, clockSlack)
		if !got.LeaseUntil.IsZero() || !got.StartedAt.IsZero() || !got.CompletedAt.IsZero() {
			t.Errorf("lease_until %v, started_at %v, completed_at %v: want all unset", got.LeaseUntil, got.StartedAt, got.CompletedAt)
		}
		if len(got.Output) != 0 || len(got.Checkpoint) != 0 {
			t.Errorf("output %s, checkpoint %s: want both NULL", got.Output, got.Checkpoint)
		}
		if r.ID != got.ID || r.Status != got.Status {
			t.Errorf("EnqueueRun returned %+v, GetRun %+v", r, got)
		}

		evs := h.events(r.ID)
		wantEventTypes(t, evs, starflowtype.EventRunQueued)
		if len(evs) == 1 {
			equal(t, "run_queued attempt", evs[0].Attempt, 1)
			equal(t, "run_queued run_id", evs[0].RunID, r.ID)
		}
	})

	t.Run("ExplicitValues", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		def, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{WorkspaceID: "acme", Name: "orders", Revision: "rev1", Spec: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		parent := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "acme", Env: "staging"})
		p := &state.EnqueueRunParams{
			ID: "0a6c6f0e-3f51-4a0b-9a0e-2b0f6c1d2e3f", WorkspaceID: "acme", Env: "staging",
			DefinitionID: def.ID, WorkflowName: "orders", WorkflowRevision: "rev1",
			RunnerPool: "payments", Priority: 7, MaxAttempts: 5, RecoveryMode: starflowtype.RecoveryResume,
			TriggerType: starflowtype.TriggerChild, ParentRunID: parent.ID, IdempotencyKey: "key-1",
			Input: json.RawMessage(`{"sku":"A1","qty":2}`),
		}
		h.enqueue(p)
		got := h.getRun(p.ID)
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"workspace_id", got.WorkspaceID, "acme"},
			{"env", got.Env, "staging"},
			{"definition_id", got.DefinitionID, def.ID},
			{"runner_pool", got.RunnerPool, "payments"},
			{"priority", got.Priority, 7},
			{"max_attempts", got.MaxAttempts, 5},
			{"recovery_mode", got.RecoveryMode, starflowtype.RecoveryResume},
			{"trigger_type", got.TriggerType, starflowtype.TriggerChild},
			{"parent_run_id", got.ParentRunID, parent.ID},
			{"idempotency_key", got.IdempotencyKey, "key-1"},
		} {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
			}
		}
		jsonEqual(t, "input", got.Input, `{"sku":"A1","qty":2}`)

		_, err = h.a.GetRun(h.ctx(), &state.GetRunParams{WorkspaceID: "acme", ID: p.ID})
		if err != nil {
			t.Errorf("GetRun in the run's workspace: %v", err)
		}
		_, err = h.a.GetRun(h.ctx(), &state.GetRunParams{WorkspaceID: "other", ID: p.ID})
		wantErrIs(t, "GetRun from another workspace", err, starflowtype.ErrNotFound)
	})

	t.Run("DuplicateIDIsConflict", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		r := h.enqueue(nil)
		_, err := h.a.EnqueueRun(h.ctx(), &state.EnqueueRunParams{ID: r.ID, WorkflowName: "wf"})
		wantErrIs(t, "EnqueueRun with an existing id", err, starflowtype.ErrConflict)
		equal(t, "events of the first run", len(h.events(r.ID)), 1)
	})
}
