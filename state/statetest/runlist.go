package statetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// The lowest and highest canonical uuids.
const (
	minUUID = "00000000-0000-0000-0000-000000000000"
	maxUUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
)

// listing is what a ListRuns call should return, computed from the runs
// as stored (GetRun) with the contract's rules: the filters of p, then
// (created_at, id) descending, then p.Limit (default 50).
func (h *harness) listing(ids []string, p *state.ListRunsParams) []string {
	h.t.Helper()
	return listingOf(h.storedRuns(ids), p)
}

// storedRuns reads each of ids back (GetRun): the runs as stored, for
// listingOf to compute many listings from while no run changes.
func (h *harness) storedRuns(ids []string) []*starflowtype.Run {
	h.t.Helper()
	runs := make([]*starflowtype.Run, len(ids))
	for i, id := range ids {
		runs[i] = h.getRun(id)
	}
	return runs
}

// listingOf is what a ListRuns call should return when stored holds the
// runs as stored: the filters of p, then (created_at, id) descending,
// then p.Limit (default 50).
func listingOf(stored []*starflowtype.Run, p *state.ListRunsParams) []string {
	var runs []*starflowtype.Run
	for _, r := range stored {
		if matchesListing(r, p) {
			runs = append(runs, r)
		}
	}
	out := sortedListing(runs)
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	return out[:min(len(out), limit)]
}

// matchesListing reports whether r passes p's filters.
func matchesListing(r *starflowtype.Run, p *state.ListRunsParams) bool {
	beat := r.LastHeartbeat
	if beat.IsZero() {
		beat = r.StartedAt
	}
	switch {
	case p.WorkspaceID != "" && r.WorkspaceID != p.WorkspaceID,
		p.Env != "" && r.Env != p.Env,
		p.WorkflowName != "" && r.WorkflowName != p.WorkflowName,
		len(p.Status) > 0 && !slices.Contains(p.Status, r.Status),
		p.ParentRunID != "" && r.ParentRunID != strings.ToLower(p.ParentRunID),
		!p.StaleBefore.IsZero() && !(r.Status == starflowtype.RunRunning && beat.Before(p.StaleBefore)),
		!p.CreatedAfter.IsZero() && r.CreatedAt.Before(p.CreatedAfter),
		!p.CreatedBefore.IsZero() && !r.CreatedAt.Before(p.CreatedBefore),
		p.DeadLettered && !r.DeadLettered,
		p.After != nil && !listedBelow(r, *p.After):
		return false
	}
	return true
}

// listedBelow reports whether r comes after cursor c in the listing's
// order.
func listedBelow(r *starflowtype.Run, c state.RunCursor) bool {
	return r.CreatedAt.Before(c.CreatedAt) || (r.CreatedAt.Equal(c.CreatedAt) && r.ID < strings.ToLower(c.ID))
}

// listRuns calls ListRuns and returns the ids.
func (h *harness) listRuns(p *state.ListRunsParams) []string {
	h.t.Helper()
	runs, err := h.a.ListRuns(h.ctx(), p)
	if err != nil {
		h.t.Fatalf("ListRuns(%s): %v", describeListing(p), err)
	}
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// walk pages through the listing p names with p.Limit runs a page, each
// page after the last run of the one before, calling between (when set)
// after every page; it returns the ids in the order listed.
func (h *harness) walk(p state.ListRunsParams, between func()) []string {
	h.t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			h.t.Fatalf("ListRuns(%s): more than 1000 pages", describeListing(&p))
		}
		runs, err := h.a.ListRuns(h.ctx(), &p)
		if err != nil {
			h.t.Fatalf("ListRuns(%s): %v", describeListing(&p), err)
		}
		if len(runs) > p.Limit {
			h.t.Fatalf("ListRuns(%s) returned %d runs, over the limit", describeListing(&p), len(runs))
		}
		if len(runs) == 0 {
			return out
		}
		for _, r := range runs {
			out = append(out, r.ID)
		}
		last := runs[len(runs)-1]
		p.After = &state.RunCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		if between != nil {
			between()
		}
	}
}

// describeListing renders p's set fields for failure messages.
func describeListing(p *state.ListRunsParams) string {
	var b strings.Builder
	add := func(name string, v any) { fmt.Fprintf(&b, "%s=%v ", name, v) }
	if p.WorkspaceID != "" {
		add("workspace", p.WorkspaceID)
	}
	if p.Env != "" {
		add("env", p.Env)
	}
	if p.WorkflowName != "" {
		add("workflow", p.WorkflowName)
	}
	if len(p.Status) > 0 {
		add("status", p.Status)
	}
	if p.ParentRunID != "" {
		add("parent", p.ParentRunID)
	}
	for name, v := range map[string]time.Time{"stale_before": p.StaleBefore, "created_after": p.CreatedAfter, "created_before": p.CreatedBefore} {
		if !v.IsZero() {
			add(name, v.Format(time.RFC3339Nano))
		}
	}
	if p.DeadLettered {
		add("dead_lettered", true)
	}
	if p.After != nil {
		add("after", p.After.CreatedAt.Format(time.RFC3339Nano)+"/"+p.After.ID)
	}
	if p.Limit != 0 {
		add("limit", p.Limit)
	}
	return strings.TrimSpace(b.String())
}

// testRunListing: every ListRuns filter alone and combined, the order
// (created_at, id) descending, and keyset paging with ListRunsParams.After,
// including runs that share a created_at and runs enqueued between pages.
func (s *suite) testRunListing(t *testing.T) {
	t.Parallel()
	t.Run("Filters", s.testListingFilters)
	t.Run("Paging", s.testListingPaging)
	t.Run("SharedCreatedAt", s.testListingSharedCreatedAt)
	t.Run("BadCursor", func(t *testing.T) {
		t.Parallel()
		h := s.adapter(t)
		for what, c := range map[string]*state.RunCursor{
			"an id not a uuid":  {CreatedAt: time.Now(), ID: "run-1"},
			"no created_at":     {ID: uuid.NewString()},
			"no id":             {CreatedAt: time.Now()},
			"a prefix of an id": {CreatedAt: time.Now(), ID: "abcdef01"},
		} {
			_, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{After: c})
			wantErrIs(t, "ListRuns after a cursor with "+what, err, starflowtype.ErrInvalid)
		}
	})
}

func (s *suite) testListingFilters(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	var ids []string
	enqueue := func(p *state.EnqueueRunParams) *starflowtype.Run {
		t.Helper()
		r := h.enqueue(p)
		ids = append(ids, r.ID)
		return r
	}
	// Runs to start are enqueued with a priority, so that they are the
	// ones claimed.
	started := func(p *state.EnqueueRunParams, runner string) (*starflowtype.Run, starflowtype.Lease) {
		t.Helper()
		p.Priority = 5
		return h.claimAndStart(enqueue(p).ID, runner)
	}
	enqueue(&state.EnqueueRunParams{WorkflowName: "orders"})
	enqueue(&state.EnqueueRunParams{WorkflowName: "billing", Env: "staging"})
	parent, _ := started(&state.EnqueueRunParams{WorkflowName: "parent"}, runnerA)
	child1 := enqueue(&state.EnqueueRunParams{WorkflowName: "child", ParentRunID: parent.ID})
	enqueue(&state.EnqueueRunParams{WorkflowName: "child", ParentRunID: parent.ID, Env: "staging"})
	busy, _ := started(&state.EnqueueRunParams{}, runnerB)
	dead, ld := started(&state.EnqueueRunParams{MaxAttempts: 1}, runnerA)
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: dead.ID, Lease: ld, Error: "x", Retry: true}); err != nil {
		t.Fatal(err)
	}
	failed, lf := started(&state.EnqueueRunParams{WorkflowName: "orders"}, runnerB)
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: failed.ID, Lease: lf, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	enqueue(&state.EnqueueRunParams{WorkflowName: "orders", WorkspaceID: "acme"})
	enqueue(&state.EnqueueRunParams{WorkflowName: "child", WorkspaceID: "acme", Env: "staging", ParentRunID: parent.ID})
	equal(t, "dead-lettered run", h.getRun(dead.ID).DeadLettered, true)
	equal(t, "failed run not dead-lettered", h.getRun(failed.ID).DeadLettered, false)

	busyBeat := h.getRun(busy.ID).LastHeartbeat
	mid := h.getRun(child1.ID).CreatedAt
	later := time.Now().Add(time.Hour)
	st := func(s ...starflowtype.RunStatus) []starflowtype.RunStatus { return s }
	queued, running, failedSt := starflowtype.RunQueued, starflowtype.RunRunning, starflowtype.RunFailed
	cases := []state.ListRunsParams{
		{},
		{WorkspaceID: state.DefaultWorkspace},
		{WorkspaceID: "acme"},
		{WorkspaceID: "nowhere"},
		{Env: "staging"},
		{WorkspaceID: state.DefaultWorkspace, Env: "prod"},
		{WorkflowName: "orders"},
		{WorkspaceID: state.DefaultWorkspace, WorkflowName: "orders"},
		{Status: st(queued)},
		{Status: st(queued, queued, running)},
		{WorkspaceID: state.DefaultWorkspace, Status: st(queued)},
		{WorkspaceID: state.DefaultWorkspace, Status: st(failedSt, running, queued, running)},
		{WorkspaceID: state.DefaultWorkspace, Status: st(starflowtype.RunPaused)},
		{WorkspaceID: "acme", Status: st(queued), WorkflowName: "child"},
		{ParentRunID: parent.ID},
		{ParentRunID: strings.ToUpper(parent.ID), Env: "staging"},
		{ParentRunID: parent.ID, WorkspaceID: state.DefaultWorkspace},
		{ParentRunID: parent.ID, Status: st(queued), WorkflowName: "child"},
		{ParentRunID: parent.ID, Status: st(running)},
		{ParentRunID: child1.ID},
		{ParentRunID: "not-a-uuid"},
		{StaleBefore: later},
		{StaleBefore: later, WorkspaceID: state.DefaultWorkspace},
		{StaleBefore: busyBeat},
		{StaleBefore: busyBeat.Add(time.Nanosecond)},
		{StaleBefore: later, Status: st(queued)},
		{StaleBefore: later, Status: st(queued, running)},
		{StaleBefore: later, WorkspaceID: state.DefaultWorkspace, Status: st(queued)},
		{DeadLettered: true},
		{DeadLettered: true, WorkspaceID: state.DefaultWorkspace, Status: st(failedSt)},
		{DeadLettered: true, WorkspaceID: "acme"},
		{WorkspaceID: state.DefaultWorkspace, Status: st(failedSt)},
		{CreatedAfter: mid},
		{CreatedAfter: mid.Add(time.Nanosecond)},
		{CreatedBefore: mid},
		{CreatedBefore: mid.Add(time.Nanosecond)},
		{CreatedAfter: mid, CreatedBefore: later, WorkspaceID: state.DefaultWorkspace},
		{CreatedAfter: later},
		{CreatedBefore: mid, After: &state.RunCursor{CreatedAt: later, ID: maxUUID}},
		{CreatedBefore: later, After: &state.RunCursor{CreatedAt: mid, ID: child1.ID}},
		{After: &state.RunCursor{CreatedAt: mid, ID: strings.ToUpper(child1.ID)}, WorkspaceID: state.DefaultWorkspace},
		{After: &state.RunCursor{CreatedAt: mid.Add(time.Nanosecond), ID: minUUID}, Status: st(queued), WorkspaceID: state.DefaultWorkspace},
		{After: &state.RunCursor{CreatedAt: mid, ID: minUUID}, ParentRunID: parent.ID},
		{WorkspaceID: state.DefaultWorkspace, Env: "staging", WorkflowName: "child", Status: st(queued), ParentRunID: parent.ID,
			CreatedAfter: mid, CreatedBefore: later},
	}
	// No run changes from here on: the expected listings are computed
	// from one read of the runs as stored.
	stored := h.storedRuns(ids)
	for _, p := range cases {
		want := listingOf(stored, &p)
		equal(t, "ListRuns("+describeListing(&p)+")", dump(h.listRuns(&p)), dump(want))
		limited := p
		limited.Limit = 2
		equal(t, "ListRuns("+describeListing(&limited)+")", dump(h.listRuns(&limited)), dump(want[:min(2, len(want))]))
		// Two runs a page, each after the last of the one before: the
		// whole listing, each run once.
		equal(t, "pages of ListRuns("+describeListing(&limited)+")", dump(orEmpty(h.walk(limited, nil))), dump(listingOf(stored, &state.ListRunsParams{
			WorkspaceID: p.WorkspaceID, Env: p.Env, WorkflowName: p.WorkflowName, Status: p.Status, ParentRunID: p.ParentRunID,
			StaleBefore: p.StaleBefore, CreatedAfter: p.CreatedAfter, CreatedBefore: p.CreatedBefore, DeadLettered: p.DeadLettered,
			After: p.After, Limit: 1000,
		})))
	}
	// The cases are not vacuous.
	for _, c := range []struct {
		p    state.ListRunsParams
		want int
	}{
		{state.ListRunsParams{}, len(ids)},
		{state.ListRunsParams{ParentRunID: parent.ID}, 3},
		{state.ListRunsParams{StaleBefore: later}, 2},
		{state.ListRunsParams{DeadLettered: true}, 1},
		{state.ListRunsParams{Env: "staging"}, 3},
	} {
		equal(t, "runs in ListRuns("+describeListing(&c.p)+")", len(h.listRuns(&c.p)), c.want)
	}
}

// testListingPaging: 25 runs, 7 a page, two more runs enqueued after
// every page: every one of the 25 is listed exactly once, in order, in
// each listing shape (a workspace, every workspace, a status, a parent's
// children).
func (s *suite) testListingPaging(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	parent := h.enqueue(&state.EnqueueRunParams{WorkflowName: "parent", Priority: 5})
	all := []string{parent.ID}
	for range 25 {
		all = append(all, h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID}).ID)
	}
	for _, p := range []state.ListRunsParams{
		{WorkspaceID: state.DefaultWorkspace, Limit: 7},
		{Limit: 7},
		{WorkspaceID: state.DefaultWorkspace, Status: []starflowtype.RunStatus{starflowtype.RunQueued}, Limit: 7},
		{ParentRunID: parent.ID, Limit: 7},
	} {
		what := "pages of ListRuns(" + describeListing(&p) + ")"
		want := h.listing(all, &state.ListRunsParams{WorkspaceID: p.WorkspaceID, Status: p.Status, ParentRunID: p.ParentRunID, Limit: 1000})
		var added []string
		got := h.walk(p, func() {
			for range 2 {
				r := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID})
				added, all = append(added, r.ID), append(all, r.ID)
			}
		})
		// No run twice; the runs there before the walk all, in order. (Runs
		// enqueued meanwhile are newer than the pages already read, unless
		// they share the created_at of the last run read.)
		seen := map[string]bool{}
		var old []string
		for _, id := range got {
			if seen[id] {
				t.Errorf("%s: run %s listed twice", what, id)
			}
			seen[id] = true
			if !slices.Contains(added, id) {
				old = append(old, id)
			}
		}
		equal(t, what+": the runs there before the walk", dump(old), dump(want))
	}
}

// testListingSharedCreatedAt: runs that share a created_at are listed by
// id, and a cursor among them (or between two adjacent instants, or finer
// than the store's precision) lists exactly the runs after it.
func (s *suite) testListingSharedCreatedAt(t *testing.T) {
	t.Parallel()
	if s.opts.SetCreatedAt == nil {
		t.Skip("statetest: Options.SetCreatedAt is not set")
	}
	h := s.stored(t)
	parent := h.enqueue(&state.EnqueueRunParams{WorkflowName: "parent"})
	var runs []string
	for i := range 14 {
		r := h.enqueue(&state.EnqueueRunParams{ParentRunID: parent.ID, WorkspaceID: []string{state.DefaultWorkspace, "acme"}[i%5/4]})
		runs = append(runs, r.ID)
	}
	at1 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	at2 := at1.Add(time.Millisecond) // the next instant of the coarsest precision
	s.opts.SetCreatedAt(t, h.a, at1, runs[:6]...)
	s.opts.SetCreatedAt(t, h.a, at2, runs[6:11]...)
	all := append([]string{parent.ID}, runs...)
	equal(t, "created_at as stored", h.getRun(runs[0]).CreatedAt, at1)

	at1IDs := slices.Clone(runs[:6])
	slices.Sort(at1IDs)
	cursors := []*state.RunCursor{
		nil,
		{CreatedAt: at1, ID: at1IDs[3]},
		{CreatedAt: at1, ID: at1IDs[0]},
		{CreatedAt: at1, ID: maxUUID},
		{CreatedAt: at1, ID: minUUID},
		{CreatedAt: at2, ID: minUUID},
		{CreatedAt: at1.Add(time.Nanosecond), ID: minUUID},
		{CreatedAt: at1.Add(500 * time.Microsecond), ID: maxUUID},
		{CreatedAt: at2.Add(-time.Nanosecond), ID: maxUUID},
	}
	// No run changes from here on: the expected listings are computed
	// from one read of the runs as stored.
	stored := h.storedRuns(all)
	for _, shape := range []state.ListRunsParams{
		{},
		{WorkspaceID: state.DefaultWorkspace},
		{WorkspaceID: state.DefaultWorkspace, Status: []starflowtype.RunStatus{starflowtype.RunQueued}},
		{ParentRunID: parent.ID},
	} {
		for _, c := range cursors {
			p := shape
			p.After = c
			want := listingOf(stored, &p)
			equal(t, "ListRuns("+describeListing(&p)+")", dump(h.listRuns(&p)), dump(want))
			p.Limit = 2
			equal(t, "pages of ListRuns("+describeListing(&p)+")", dump(orEmpty(h.walk(p, nil))), dump(want))
		}
		for _, p := range []state.ListRunsParams{
			{CreatedBefore: at2}, {CreatedBefore: at2.Add(time.Nanosecond)}, {CreatedBefore: at1},
			{CreatedAfter: at1}, {CreatedAfter: at1.Add(time.Nanosecond)}, {CreatedAfter: at2.Add(-time.Nanosecond)},
			{CreatedAfter: at1, CreatedBefore: at2},
			{CreatedBefore: at2, After: &state.RunCursor{CreatedAt: at2, ID: maxUUID}},
		} {
			p.WorkspaceID, p.Status, p.ParentRunID = shape.WorkspaceID, shape.Status, shape.ParentRunID
			equal(t, "ListRuns("+describeListing(&p)+")", dump(h.listRuns(&p)), dump(listingOf(stored, &p)))
		}
	}
	equal(t, "runs at the first instant", len(h.listRuns(&state.ListRunsParams{CreatedBefore: at2, CreatedAfter: at1})), 6)
}
