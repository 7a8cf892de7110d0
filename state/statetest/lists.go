package statetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// listingOrder is the ids of runs in ListRuns' order: (created_at, id)
// descending, created_at as stored (read back).
func listingOrder(h *harness, runs []*starflowtype.Run) []string {
	h.t.Helper()
	stored := make([]*starflowtype.Run, len(runs))
	for i, r := range runs {
		stored[i] = h.getRun(r.ID)
	}
	return sortedListing(stored)
}

// sortedListing is the ids of runs (as stored) in ListRuns' order:
// (created_at, id) descending.
func sortedListing(runs []*starflowtype.Run) []string {
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b *starflowtype.Run) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// testLists: ListRuns filters and order, ListSteps and ListCheckpoints by
// attempt, ListEvents paging, GetRun misses.
func (s *suite) testLists(t *testing.T) {
	t.Parallel()

	t.Run("Runs", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		// Enqueued in this order; newest first is the reverse (but for runs
		// that share a created_at, see newest below).
		a := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders"})
		b := h.enqueue(&state.EnqueueRunParams{WorkflowName: "billing"})
		c := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders", Priority: 2})
		d := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders", WorkspaceID: "acme"})
		e := h.enqueue(&state.EnqueueRunParams{WorkflowName: "orders", Priority: 1})
		// c runs, e succeeds: statuses queued (a, b, d), running (c), succeeded (e).
		h.claimAndStart(c.ID, runnerA)
		_, le := h.claimAndStart(e.ID, runnerA)
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: e.ID, Lease: le}); err != nil {
			t.Fatal(err)
		}

		// Newest first: (created_at, id) descending. Runs enqueued within
		// the store's time precision share a created_at; their ids order
		// them.
		newest := func(runs ...*starflowtype.Run) []string {
			return listingOrder(h, runs)
		}
		ids := func(p *state.ListRunsParams) []string {
			t.Helper()
			runs, err := h.a.ListRuns(h.ctx(), p)
			if err != nil {
				t.Fatalf("ListRuns(%+v): %v", p, err)
			}
			out := []string{}
			for _, r := range runs {
				out = append(out, r.ID)
			}
			return out
		}
		for _, c2 := range []struct {
			what string
			p    *state.ListRunsParams
			want []string
		}{
			{"all", &state.ListRunsParams{}, newest(a, b, c, d, e)},
			{"limit 2", &state.ListRunsParams{Limit: 2}, newest(a, b, c, d, e)[:2]},
			{"workflow orders", &state.ListRunsParams{WorkflowName: "orders"}, newest(a, c, d, e)},
			{"workflow billing", &state.ListRunsParams{WorkflowName: "billing"}, []string{b.ID}},
			{"workflow none", &state.ListRunsParams{WorkflowName: "none"}, []string{}},
			{"status queued", &state.ListRunsParams{Status: []starflowtype.RunStatus{starflowtype.RunQueued}}, newest(a, b, d)},
			{"status running or succeeded", &state.ListRunsParams{Status: []starflowtype.RunStatus{starflowtype.RunRunning, starflowtype.RunSucceeded}}, newest(c, e)},
			{"status failed", &state.ListRunsParams{Status: []starflowtype.RunStatus{starflowtype.RunFailed}}, []string{}},
			{"workspace default", &state.ListRunsParams{WorkspaceID: state.DefaultWorkspace}, newest(a, b, c, e)},
			{"workspace acme", &state.ListRunsParams{WorkspaceID: "acme"}, newest(d)},
			{"orders, queued, limit 1", &state.ListRunsParams{WorkflowName: "orders", Status: []starflowtype.RunStatus{starflowtype.RunQueued}, Limit: 1}, newest(a, d)[:1]},
		} {
			equal(t, "ListRuns "+c2.what, dump(ids(c2.p)), dump(c2.want))
		}

		// More runs than the default limit of 50.
		for range 52 {
			h.enqueue(&state.EnqueueRunParams{WorkflowName: "bulk"})
		}
		equal(t, "ListRuns with the default limit", len(ids(&state.ListRunsParams{WorkflowName: "bulk"})), 50)
	})

	t.Run("StepsAndCheckpointsByAttempt", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		h.runStep(stepKey(run, "", "a"), l, `"a1"`, `{}`)
		h.runStep(stepKey(run, "", "b"), l, `"b1"`, `{}`)
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "x", Retry: true}); err != nil {
			t.Fatal(err)
		}
		run2, l2 := h.claimAndStart(run.ID, runnerB)
		equal(t, "attempt", run2.Attempt, 2)
		h.runStep(stepKey(run2, "", "a"), l2, `"a2"`, `{}`)

		for _, c := range []struct {
			attempt int
			want    []string
		}{
			{0, []string{"1/a", "1/b", "2/a"}},
			{1, []string{"1/a", "1/b"}},
			{2, []string{"2/a"}},
			{3, []string{}},
		} {
			steps := []string{}
			for _, st := range h.steps(run.ID, c.attempt) {
				steps = append(steps, fmt.Sprintf("%d/%s", st.Attempt, st.StepID))
			}
			equal(t, fmt.Sprintf("ListSteps attempt %d", c.attempt), dump(steps), dump(c.want))
			cps := []string{}
			for _, cp := range h.checkpoints(run.ID, c.attempt) {
				cps = append(cps, fmt.Sprintf("%d/%s", cp.Attempt, cp.StepID))
			}
			equal(t, fmt.Sprintf("ListCheckpoints attempt %d", c.attempt), dump(cps), dump(c.want))
		}
		cps := h.checkpoints(run.ID, 2)
		if len(cps) == 1 {
			jsonEqual(t, "attempt 2 checkpoint output", cps[0].Output, `"a2"`)
		}
	})

	t.Run("EventsPaging", func(t *testing.T) {
		t.Parallel()
		h := s.stored(t)
		run, l := h.started(nil, runnerA)
		for _, id := range []string{"a", "b"} {
			h.runStep(stepKey(run, "", id), l, `null`, `{}`)
		}
		all := h.events(run.ID)
		if len(all) != 7 {
			t.Fatalf("events = %v, want 7", eventTypes(all))
		}
		page, err := h.a.ListEvents(h.ctx(), &state.ListEventsParams{RunID: run.ID, AfterID: all[2].ID, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 2 || page[0].ID != all[3].ID || page[1].ID != all[4].ID {
			t.Errorf("page after %d limit 2 = %s, want events %d and %d", all[2].ID, dump(page), all[3].ID, all[4].ID)
		}
		rest := h.eventsAfter(run.ID, all[4].ID)
		wantEventTypes(t, rest, starflowtype.EventNodeStart, starflowtype.EventNodeComplete)
		equal(t, "events after the last", len(h.eventsAfter(run.ID, all[6].ID)), 0)

		// Another run's events never show up.
		other, _ := h.started(nil, runnerB)
		for _, e := range h.events(other.ID) {
			equal(t, "other run's event run_id", e.RunID, other.ID)
		}
		equal(t, "events of the first run", len(h.events(run.ID)), 7)
		for _, e := range all {
			if e.CreatedAt.IsZero() || e.CreatedAt.After(time.Now().Add(clockSlack)) {
				t.Errorf("event %d created_at = %v", e.ID, e.CreatedAt)
			}
		}
	})

	t.Run("GetRunNotFound", func(t *testing.T) {
		t.Parallel()
		h := s.adapter(t)
		r, err := h.a.GetRun(h.ctx(), &state.GetRunParams{ID: "00000000-0000-0000-0000-000000000000"})
		wantErrIs(t, "GetRun of an unknown id", err, starflowtype.ErrNotFound)
		if r != nil {
			t.Errorf("GetRun of an unknown id returned %+v", r)
		}
		for what, n := range map[string]int{
			"ListSteps":       len(h.steps("00000000-0000-0000-0000-000000000000", 0)),
			"ListEvents":      len(h.events("00000000-0000-0000-0000-000000000000")),
			"ListCheckpoints": len(h.checkpoints("00000000-0000-0000-0000-000000000000", 0)),
		} {
			equal(t, what+" of an unknown run", n, 0)
		}
	})
}
