package statetest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testRecentRecoveries: the recovery events a sweep writes (runner_lost,
// run_interrupted, run_dead_lettered) come back newest first with their
// run's env and workflow, within the workspace (and env) asked for, and
// no other event does.
func (s *suite) testRecentRecoveries(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	sweep := func() {
		t.Helper()
		if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{Backoff: func(int) time.Duration { return 0 }}); err != nil {
			t.Fatalf("ExpireOldLeases: %v", err)
		}
	}
	recent := func(p *state.RecentRecoveriesParams) []*starflowtype.RecoveryEvent {
		t.Helper()
		evs, err := h.a.RecentRecoveries(h.ctx(), p)
		if err != nil {
			t.Fatalf("RecentRecoveries(%+v): %v", p, err)
		}
		return evs
	}
	// One attempt: lost once, dead-lettered. Manual, in env staging: held.
	// Another workspace's run, with attempts left: lost too.
	dead := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders", MaxAttempts: 1})
	h.claimExpired(dead.ID)
	held := h.enqueue(&state.EnqueueRunParams{WorkflowName: "billing", Env: "staging", RecoveryMode: starflowtype.RecoveryManual})
	h.claimExpired(held.ID)
	other := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "acme"})
	h.claimExpired(other.ID)
	h.started(nil, runnerB) // a live run: nothing to recover
	sweep()

	evs := recent(&state.RecentRecoveriesParams{WorkspaceID: state.DefaultWorkspace})
	type seen struct {
		run, env, workflow string
		typ                starflowtype.EventType
	}
	var got []seen
	for i, e := range evs {
		if i > 0 && e.ID >= evs[i-1].ID {
			t.Errorf("event %d (id %d) after id %d: want newest first", i, e.ID, evs[i-1].ID)
		}
		if !slices.Contains(starflowtype.RecoveryEventTypes, e.Type) {
			t.Errorf("event %d is %s, not a recovery event", e.ID, e.Type)
		}
		if e.CreatedAt.IsZero() || e.Attempt != 1 {
			t.Errorf("event %d: created_at %v attempt %d", e.ID, e.CreatedAt, e.Attempt)
		}
		got = append(got, seen{e.RunID, e.Env, e.WorkflowName, e.Type})
	}
	slices.Reverse(got) // oldest first, as written
	want := []seen{
		{dead.ID, state.DefaultEnv, "orders", starflowtype.EventRunnerLost},
		{dead.ID, state.DefaultEnv, "orders", starflowtype.EventRunDeadLettered},
		{held.ID, "staging", "billing", starflowtype.EventRunnerLost},
		{held.ID, "staging", "billing", starflowtype.EventRunInterrupted},
	}
	// The sweep changes runs in an order of its own: compare per run.
	byRun := func(list []seen) map[string][]seen {
		m := map[string][]seen{}
		for _, x := range list {
			m[x.run] = append(m[x.run], x)
		}
		return m
	}
	if g, w := byRun(got), byRun(want); !reflect.DeepEqual(g, w) {
		t.Errorf("recoveries of the default workspace, by run:\n got %+v\nwant %+v", g, w)
	}

	staging := recent(&state.RecentRecoveriesParams{WorkspaceID: state.DefaultWorkspace, Env: "staging"})
	if len(staging) != 2 || staging[0].RunID != held.ID || staging[1].RunID != held.ID {
		t.Errorf("env staging: %d events, want the held run's 2", len(staging))
	}
	if one := recent(&state.RecentRecoveriesParams{WorkspaceID: state.DefaultWorkspace, Limit: 1}); len(one) != 1 || one[0].ID != evs[0].ID {
		t.Errorf("limit 1: %d events, want the newest", len(one))
	}
	// Attempts left: lost, then queued again (run_interrupted).
	acme := recent(&state.RecentRecoveriesParams{WorkspaceID: "acme"})
	if len(acme) != 2 || acme[0].RunID != other.ID || acme[0].Type != starflowtype.EventRunInterrupted ||
		acme[1].RunID != other.ID || acme[1].Type != starflowtype.EventRunnerLost {
		t.Errorf("workspace acme: %d events, want its run's runner_lost and run_interrupted", len(acme))
	}
	if none := recent(&state.RecentRecoveriesParams{}); len(none) != 0 {
		t.Errorf("no workspace: %d events, want none", len(none))
	}
	if none := recent(&state.RecentRecoveriesParams{WorkspaceID: "nobody"}); len(none) != 0 {
		t.Errorf("a workspace without runs: %d events, want none", len(none))
	}
}
