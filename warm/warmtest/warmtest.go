// Package warmtest is the conformance suite every warm store passes
// (warm/memory, warm/natskv). Call Run from the store's tests:
//
//	func TestConformance(t *testing.T) {
//		warmtest.Run(t, func(t *testing.T) warm.Store { return openFresh(t) })
//	}
//
// open must return a fresh, empty store for each call and may register its
// own cleanup; the suite also calls Close (so Close twice must be safe).
//
// Import rule: the standard library and package warm only.
package warmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/warm"
)

// pollDeadline bounds every wait for an eventual effect (presence expiry).
const pollDeadline = 20 * time.Second

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, open func(t *testing.T) warm.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s warm.Store)
	}{
		{"Ping", testPing},
		{"RunsPutGetListDelete", testRuns},
		{"RunVersionCompareAndSet", testRunVersion},
		{"RunConcurrentPutEndsWithMaxVersion", testRunConcurrent},
		{"RunKeysNeedNoEscapingByCaller", testRunOddIDs},
		{"Steps", testSteps},
		{"EventsFeedIdempotentBounded", testEvents},
		{"EventsConcurrentAppendsLoseNothing", testEventsConcurrent},
		{"SessionVars", testSessionVars},
		{"ProgressLatestPerStep", testProgress},
		{"PresenceExpires", testPresence},
		{"InvalidArguments", testInvalid},
		{"CloseTwiceAndUseAfterClose", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testPing(t *testing.T, s warm.Store) {
	must(t, s.Ping(ctxT(t)), "Ping")
}

func runEntry(id string, version int64) *warm.RunEntry {
	return &warm.RunEntry{
		RunID:        id,
		WorkspaceID:  "ws1",
		WorkflowName: "wf",
		Status:       fmt.Sprintf("v%d", version),
		ClaimState:   "leased",
		Phase:        "executing",
		Attempt:      1,
		LeasedBy:     "runner-1",
		CurrentSteps: []warm.StepEntry{{RunID: id, Attempt: 1, ScopePath: "/", StepID: "a", Status: "running"}},
		Output:       json.RawMessage(`{"x":1}`),
		Version:      version,
		Hash:         fmt.Sprintf("h%d", version),
		UpdatedAt:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func testRuns(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	if _, err := s.GetRun(ctx, "absent"); !errors.Is(err, warm.ErrNotFound) {
		t.Fatalf("GetRun(absent) = %v, want ErrNotFound", err)
	}
	ids, err := s.ListRunIDs(ctx)
	must(t, err, "ListRunIDs on empty store")
	if len(ids) != 0 {
		t.Fatalf("ListRunIDs on empty store = %v", ids)
	}
	want := runEntry("r1", 3)
	want.FinishedAt = time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	wrote, err := s.PutRun(ctx, want, false)
	must(t, err, "PutRun r1")
	if !wrote {
		t.Fatal("PutRun of a new run reported no write")
	}
	_, err = s.PutRun(ctx, runEntry("r2", 1), false)
	must(t, err, "PutRun r2")

	got, err := s.GetRun(ctx, "r1")
	must(t, err, "GetRun r1")
	if !runEqual(got, want) {
		t.Fatalf("GetRun r1 = %+v, want %+v", got, want)
	}
	// The store keeps a copy: changing the caller's entry changes nothing.
	want.Status = "mutated"
	got, err = s.GetRun(ctx, "r1")
	must(t, err, "GetRun r1 again")
	if got.Status != "v3" {
		t.Fatalf("stored entry aliases the caller's: status %q", got.Status)
	}

	ids, err = s.ListRunIDs(ctx)
	must(t, err, "ListRunIDs")
	sort.Strings(ids)
	if !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Fatalf("ListRunIDs = %v, want [r1 r2]", ids)
	}

	must(t, s.PutStep(ctx, &warm.StepEntry{RunID: "r1", Attempt: 1, ScopePath: "/", StepID: "a", Status: "ok"}), "PutStep")
	must(t, s.PutProgress(ctx, &warm.Progress{RunID: "r1", ScopePath: "/", StepID: "a", Fraction: 0.5}), "PutProgress")
	must(t, s.PutStep(ctx, &warm.StepEntry{RunID: "r2", Attempt: 1, ScopePath: "/", StepID: "b", Status: "ok"}), "PutStep r2")

	must(t, s.DeleteRun(ctx, "r1"), "DeleteRun r1")
	must(t, s.DeleteRun(ctx, "r1"), "DeleteRun r1 twice")
	must(t, s.DeleteRun(ctx, "never-existed"), "DeleteRun absent")
	if _, err := s.GetRun(ctx, "r1"); !errors.Is(err, warm.ErrNotFound) {
		t.Fatalf("GetRun after DeleteRun = %v, want ErrNotFound", err)
	}
	steps, err := s.ListSteps(ctx, "r1")
	must(t, err, "ListSteps after DeleteRun")
	if len(steps) != 0 {
		t.Fatalf("DeleteRun left %d steps", len(steps))
	}
	prog, err := s.ListProgress(ctx, "r1")
	must(t, err, "ListProgress after DeleteRun")
	if len(prog) != 0 {
		t.Fatalf("DeleteRun left %d progress reports", len(prog))
	}
	steps, err = s.ListSteps(ctx, "r2")
	must(t, err, "ListSteps r2")
	if len(steps) != 1 {
		t.Fatalf("DeleteRun r1 touched r2's steps: %d left", len(steps))
	}
	ids, err = s.ListRunIDs(ctx)
	must(t, err, "ListRunIDs after delete")
	if !slices.Equal(ids, []string{"r2"}) {
		t.Fatalf("ListRunIDs after delete = %v, want [r2]", ids)
	}
	// A deleted run can be written again from any version.
	wrote, err = s.PutRun(ctx, runEntry("r1", 1), false)
	must(t, err, "PutRun after delete")
	if !wrote {
		t.Fatal("PutRun after DeleteRun reported no write")
	}
}

func runEqual(a, b *warm.RunEntry) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb) && a.UpdatedAt.Equal(b.UpdatedAt) && a.FinishedAt.Equal(b.FinishedAt)
}

func testRunVersion(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	put := func(v int64, force, wantWrote bool) {
		t.Helper()
		wrote, err := s.PutRun(ctx, runEntry("r", v), force)
		must(t, err, fmt.Sprintf("PutRun v%d force=%v", v, force))
		if wrote != wantWrote {
			t.Fatalf("PutRun v%d force=%v wrote=%v, want %v", v, force, wrote, wantWrote)
		}
	}
	check := func(v int64) {
		t.Helper()
		got, err := s.GetRun(ctx, "r")
		must(t, err, "GetRun")
		if got.Version != v || got.Status != fmt.Sprintf("v%d", v) {
			t.Fatalf("stored version %d status %q, want %d", got.Version, got.Status, v)
		}
	}
	put(5, false, true)
	check(5)
	put(4, false, false) // older: no-op
	check(5)
	e := runEntry("r", 5)
	e.Status = "same-version-other-data"
	wrote, err := s.PutRun(ctx, e, false) // equal: no-op
	must(t, err, "PutRun equal version")
	if wrote {
		t.Fatal("PutRun with an equal version wrote")
	}
	check(5)
	put(7, false, true)
	check(7)
	put(2, true, true) // force: the sweep repairs, whatever the version
	check(2)
	put(3, false, true)
	check(3)
}

func testRunConcurrent(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	const writers, perWriter = 16, 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		max  int64
		errs []error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for range perWriter {
				v := r.Int64N(1000) + 1
				mu.Lock()
				if v > max {
					max = v
				}
				mu.Unlock()
				if _, err := s.PutRun(ctx, runEntry("hot", v), false); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent PutRun: %d errors, first %v", len(errs), errs[0])
	}
	got, err := s.GetRun(ctx, "hot")
	must(t, err, "GetRun hot")
	if got.Version != max || got.Status != fmt.Sprintf("v%d", max) {
		t.Fatalf("after concurrent writes version %d status %q, want max version %d", got.Version, got.Status, max)
	}
}

// testRunOddIDs: ids with characters that are not valid in every key
// space (dots, spaces, slashes, wildcards, non-ASCII) round-trip.
func testRunOddIDs(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	ids := []string{"a.b", "with space", "x/y/z", "*", ">", "ünï", "run:1", "-"}
	for i, id := range ids {
		_, err := s.PutRun(ctx, runEntry(id, int64(i+1)), false)
		must(t, err, fmt.Sprintf("PutRun %q", id))
		must(t, s.PutStep(ctx, &warm.StepEntry{RunID: id, ScopePath: "/p.q/*", StepID: "s.1 >", Status: "ok"}), "PutStep odd")
		must(t, s.PutSessionVar(ctx, "w.s", id, "k *", json.RawMessage(`1`)), "PutSessionVar odd")
	}
	got, err := s.ListRunIDs(ctx)
	must(t, err, "ListRunIDs")
	sort.Strings(got)
	want := slices.Clone(ids)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ListRunIDs = %q, want %q", got, want)
	}
	for i, id := range ids {
		e, err := s.GetRun(ctx, id)
		must(t, err, fmt.Sprintf("GetRun %q", id))
		if e.RunID != id || e.Version != int64(i+1) {
			t.Fatalf("GetRun %q = %q v%d", id, e.RunID, e.Version)
		}
		steps, err := s.ListSteps(ctx, id)
		must(t, err, "ListSteps odd")
		if len(steps) != 1 || steps[0].StepID != "s.1 >" || steps[0].ScopePath != "/p.q/*" {
			t.Fatalf("ListSteps %q = %+v", id, steps)
		}
	}
	// "a.b" must not match "a" or be listed under another id's prefix.
	steps, err := s.ListSteps(ctx, "a")
	must(t, err, "ListSteps a")
	if len(steps) != 0 {
		t.Fatalf("ListSteps(a) saw another run's steps: %+v", steps)
	}
}

func testSteps(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	steps, err := s.ListSteps(ctx, "r")
	must(t, err, "ListSteps empty")
	if len(steps) != 0 {
		t.Fatalf("ListSteps on empty = %v", steps)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	put := func(attempt int, scope, id, status string) {
		t.Helper()
		must(t, s.PutStep(ctx, &warm.StepEntry{RunID: "r", Attempt: attempt, ScopePath: scope, StepID: id, Kind: "shell", Status: status, Tries: 1, UpdatedAt: at}), "PutStep")
	}
	put(1, "/", "a", "running")
	put(1, "/", "a", "succeeded") // same instance: last write wins
	put(1, "/loop[0]", "a", "running")
	put(2, "/", "a", "running") // another attempt: another instance
	put(1, "/", "b", "failed")
	must(t, s.PutStep(ctx, &warm.StepEntry{RunID: "other", Attempt: 1, ScopePath: "/", StepID: "z", Status: "ok"}), "PutStep other")

	steps, err = s.ListSteps(ctx, "r")
	must(t, err, "ListSteps")
	var got []string
	for _, st := range steps {
		if st.RunID != "r" || st.Kind != "shell" || st.Tries != 1 || !st.UpdatedAt.Equal(at) {
			t.Fatalf("step fields not kept: %+v", st)
		}
		got = append(got, fmt.Sprintf("%d|%s|%s|%s", st.Attempt, st.ScopePath, st.StepID, st.Status))
	}
	sort.Strings(got)
	want := []string{"1|/loop[0]|a|running", "1|/|a|succeeded", "1|/|b|failed", "2|/|a|running"}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ListSteps = %q, want %q", got, want)
	}
}

func testSessionVars(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	if _, err := s.GetSessionVar(ctx, "w", "s", "k"); !errors.Is(err, warm.ErrNotFound) {
		t.Fatalf("GetSessionVar absent = %v, want ErrNotFound", err)
	}
	must(t, s.PutSessionVar(ctx, "w", "s", "k", json.RawMessage(`{"a":1}`)), "PutSessionVar")
	must(t, s.PutSessionVar(ctx, "w", "s2", "k", json.RawMessage(`"other session"`)), "PutSessionVar s2")
	must(t, s.PutSessionVar(ctx, "w2", "s", "k", json.RawMessage(`"other workspace"`)), "PutSessionVar w2")
	must(t, s.PutSessionVar(ctx, "w", "s", "k", json.RawMessage(`[1,2]`)), "PutSessionVar overwrite")
	v, err := s.GetSessionVar(ctx, "w", "s", "k")
	must(t, err, "GetSessionVar")
	if string(v) != `[1,2]` {
		t.Fatalf("GetSessionVar = %s, want [1,2]", v)
	}
	v, err = s.GetSessionVar(ctx, "w2", "s", "k")
	must(t, err, "GetSessionVar w2")
	if string(v) != `"other workspace"` {
		t.Fatalf("GetSessionVar w2 = %s", v)
	}
	// An explicit JSON null is a value, not a delete.
	must(t, s.PutSessionVar(ctx, "w", "s", "n", json.RawMessage(`null`)), "PutSessionVar null")
	v, err = s.GetSessionVar(ctx, "w", "s", "n")
	must(t, err, "GetSessionVar null")
	if string(v) != "null" {
		t.Fatalf("GetSessionVar null = %q", v)
	}
	must(t, s.PutSessionVar(ctx, "w", "s", "k", nil), "PutSessionVar nil (delete)")
	if _, err := s.GetSessionVar(ctx, "w", "s", "k"); !errors.Is(err, warm.ErrNotFound) {
		t.Fatalf("GetSessionVar after delete = %v, want ErrNotFound", err)
	}
	must(t, s.PutSessionVar(ctx, "w", "s", "k", nil), "delete absent")
	v, err = s.GetSessionVar(ctx, "w", "s2", "k")
	must(t, err, "GetSessionVar s2 after deleting s")
	if string(v) != `"other session"` {
		t.Fatalf("deleting w/s/k touched w/s2/k: %s", v)
	}
}

func testProgress(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	put := func(scope, step string, f float64, msg string) {
		t.Helper()
		must(t, s.PutProgress(ctx, &warm.Progress{RunID: "r", ScopePath: scope, StepID: step, Fraction: f, Message: msg, At: at}), "PutProgress")
	}
	put("/", "a", 0.1, "start")
	put("/", "a", 0.6, "more")
	put("/", "b", 1, "done")
	put("/loop[1]", "a", 0, "")
	must(t, s.PutProgress(ctx, &warm.Progress{RunID: "r2", ScopePath: "/", StepID: "a", Fraction: 0.2}), "PutProgress r2")
	ps, err := s.ListProgress(ctx, "r")
	must(t, err, "ListProgress")
	var got []string
	for _, p := range ps {
		if p.RunID != "r" || !p.At.Equal(at) {
			t.Fatalf("progress fields not kept: %+v", p)
		}
		got = append(got, fmt.Sprintf("%s|%s|%g|%s", p.ScopePath, p.StepID, p.Fraction, p.Message))
	}
	sort.Strings(got)
	want := []string{"/loop[1]|a|0|", "/|a|0.6|more", "/|b|1|done"}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ListProgress = %q, want %q", got, want)
	}
}

func testPresence(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	beat := time.Now().UTC().Truncate(time.Millisecond)
	must(t, s.PutPresence(ctx, &warm.Presence{RunnerID: "long", Pools: []string{"default", "gpu"}, RunsHeld: 2, LastBeat: beat}, time.Hour), "PutPresence long")
	must(t, s.PutPresence(ctx, &warm.Presence{RunnerID: "short", RunsHeld: 1, LastBeat: beat}, 300*time.Millisecond), "PutPresence short")
	// Publishing again replaces (one entry per runner).
	must(t, s.PutPresence(ctx, &warm.Presence{RunnerID: "long", Pools: []string{"default", "gpu"}, RunsHeld: 3, LastBeat: beat}, time.Hour), "PutPresence long again")

	ps, err := s.ListPresence(ctx)
	must(t, err, "ListPresence")
	byID := map[string]*warm.Presence{}
	for _, p := range ps {
		byID[p.RunnerID] = p
	}
	long := byID["long"]
	if len(ps) > 2 || long == nil || long.RunsHeld != 3 || !slices.Equal(long.Pools, []string{"default", "gpu"}) || !long.LastBeat.Equal(beat) {
		t.Fatalf("ListPresence = %+v", ps)
	}
	deadline := time.Now().Add(pollDeadline)
	for {
		ps, err = s.ListPresence(ctx)
		must(t, err, "ListPresence (poll)")
		ids := map[string]bool{}
		for _, p := range ps {
			ids[p.RunnerID] = true
		}
		if !ids["long"] {
			t.Fatalf("presence with a 1h ttl disappeared: %+v", ps)
		}
		if !ids["short"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("presence with a 300ms ttl still listed after %v", pollDeadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testInvalid(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	cases := map[string]error{}
	_, cases["PutRun nil"] = s.PutRun(ctx, nil, false)
	_, cases["PutRun empty id"] = s.PutRun(ctx, &warm.RunEntry{Version: 1}, false)
	cases["PutStep nil"] = s.PutStep(ctx, nil)
	cases["PutStep no step id"] = s.PutStep(ctx, &warm.StepEntry{RunID: "r"})
	cases["AppendEvents empty run"] = s.AppendEvents(ctx, "", []*warm.EventEntry{event("", 1)}, 0)
	cases["AppendEvents nil event"] = s.AppendEvents(ctx, "r", []*warm.EventEntry{nil}, 0)
	cases["AppendEvents id 0"] = s.AppendEvents(ctx, "r", []*warm.EventEntry{event("r", 0)}, 0)
	cases["AppendEvents other run"] = s.AppendEvents(ctx, "r", []*warm.EventEntry{event("q", 1)}, 0)
	noType := event("r", 1)
	noType.EventType = ""
	cases["AppendEvents no type"] = s.AppendEvents(ctx, "r", []*warm.EventEntry{noType}, 0)
	cases["PutSessionVar empty key"] = s.PutSessionVar(ctx, "w", "s", "", json.RawMessage(`1`))
	cases["PutProgress fraction 1.5"] = s.PutProgress(ctx, &warm.Progress{RunID: "r", StepID: "a", Fraction: 1.5})
	cases["PutProgress nil"] = s.PutProgress(ctx, nil)
	cases["PutPresence zero ttl"] = s.PutPresence(ctx, &warm.Presence{RunnerID: "x"}, 0)
	cases["PutPresence no id"] = s.PutPresence(ctx, &warm.Presence{}, time.Second)
	for name, err := range cases {
		if !errors.Is(err, warm.ErrInvalid) {
			t.Errorf("%s: err = %v, want warm.ErrInvalid", name, err)
		}
	}
}

func testClose(t *testing.T, s warm.Store) {
	must(t, s.Close(), "Close")
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := ctxT(t)
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping after Close succeeded")
	}
	if _, err := s.PutRun(ctx, runEntry("r", 1), false); err == nil {
		t.Fatal("PutRun after Close succeeded")
	}
	if _, err := s.GetRun(ctx, "r"); err == nil || errors.Is(err, warm.ErrNotFound) {
		t.Fatalf("GetRun after Close = %v, want a closed-store error", err)
	}
}

func event(runID string, id int64) *warm.EventEntry {
	return &warm.EventEntry{
		ID: id, RunID: runID, Attempt: 1, EventType: "node_complete", NodeID: fmt.Sprintf("n%d", id),
		ScopePath: "", Payload: json.RawMessage(fmt.Sprintf(`{"try":%d}`, id)),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, int(id)*1000, time.UTC),
	}
}

func eventIDs(evs []*warm.EventEntry) []int64 {
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// testEvents: the feed is ordered by id, fields round-trip, a re-applied
// event adds nothing, afterID pages, the newest keep are kept, and
// DeleteRun drops the feed.
func testEvents(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	got, err := s.ListEvents(ctx, "r1", 0)
	must(t, err, "ListEvents of a run without a feed")
	if len(got) != 0 {
		t.Fatalf("ListEvents of a run without a feed = %v, want empty", eventIDs(got))
	}
	// Out of order within one call and across calls.
	must(t, s.AppendEvents(ctx, "r1", []*warm.EventEntry{event("r1", 3), event("r1", 1)}, 10), "AppendEvents 3,1")
	must(t, s.AppendEvents(ctx, "r1", []*warm.EventEntry{event("r1", 2)}, 10), "AppendEvents 2")
	got, err = s.ListEvents(ctx, "r1", 0)
	must(t, err, "ListEvents")
	if !slices.Equal(eventIDs(got), []int64{1, 2, 3}) {
		t.Fatalf("feed ids %v, want [1 2 3]", eventIDs(got))
	}
	want := event("r1", 2)
	g := got[1]
	if g.RunID != want.RunID || g.Attempt != want.Attempt || g.EventType != want.EventType || g.NodeID != want.NodeID ||
		g.ScopePath != want.ScopePath || string(g.Payload) != string(want.Payload) || !g.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("event 2 = %+v, want %+v", g, want)
	}
	// Re-applied events (alone and with a new one) add nothing twice.
	changed := event("r1", 2)
	changed.EventType = "changed"
	must(t, s.AppendEvents(ctx, "r1", []*warm.EventEntry{changed}, 10), "re-append 2")
	must(t, s.AppendEvents(ctx, "r1", []*warm.EventEntry{event("r1", 3), event("r1", 4)}, 10), "re-append 3 with 4")
	got, err = s.ListEvents(ctx, "r1", 0)
	must(t, err, "ListEvents")
	if !slices.Equal(eventIDs(got), []int64{1, 2, 3, 4}) || got[1].EventType != "node_complete" {
		t.Fatalf("after re-appends: ids %v (event 2 type %q), want [1 2 3 4] unchanged", eventIDs(got), got[1].EventType)
	}
	got, err = s.ListEvents(ctx, "r1", 2)
	must(t, err, "ListEvents after 2")
	if !slices.Equal(eventIDs(got), []int64{3, 4}) {
		t.Fatalf("ListEvents after 2 = %v, want [3 4]", eventIDs(got))
	}
	got, err = s.ListEvents(ctx, "r1", 4)
	must(t, err, "ListEvents after 4")
	if len(got) != 0 {
		t.Fatalf("ListEvents after the newest = %v, want empty", eventIDs(got))
	}
	// Bounded: keep 5 of 1..12; an event older than a full feed is not
	// brought back.
	var batch []*warm.EventEntry
	for id := int64(5); id <= 12; id++ {
		batch = append(batch, event("r1", id))
	}
	must(t, s.AppendEvents(ctx, "r1", batch, 5), "AppendEvents 5..12 keep 5")
	must(t, s.AppendEvents(ctx, "r1", []*warm.EventEntry{event("r1", 1)}, 5), "re-append 1 to a full feed")
	got, err = s.ListEvents(ctx, "r1", 0)
	must(t, err, "ListEvents")
	if !slices.Equal(eventIDs(got), seq(8, 12)) {
		t.Fatalf("bounded feed %v, want %v", eventIDs(got), seq(8, 12))
	}
	// keep <= 0 is the default bound.
	batch = nil
	for id := int64(1); id <= warm.EventsKeepDefault+10; id++ {
		batch = append(batch, event("r2", id))
	}
	must(t, s.AppendEvents(ctx, "r2", batch, 0), "AppendEvents default keep")
	got, err = s.ListEvents(ctx, "r2", 0)
	must(t, err, "ListEvents r2")
	if !slices.Equal(eventIDs(got), seq(11, warm.EventsKeepDefault+10)) {
		t.Fatalf("default-bounded feed has %d events from %d, want %d from 11", len(got), eventIDs(got)[0], warm.EventsKeepDefault)
	}
	// Feeds are per run; DeleteRun drops one.
	must(t, s.DeleteRun(ctx, "r1"), "DeleteRun r1")
	got, err = s.ListEvents(ctx, "r1", 0)
	must(t, err, "ListEvents after DeleteRun")
	if len(got) != 0 {
		t.Fatalf("feed after DeleteRun = %v, want empty", eventIDs(got))
	}
	got, err = s.ListEvents(ctx, "r2", warm.EventsKeepDefault+9)
	must(t, err, "ListEvents r2")
	if !slices.Equal(eventIDs(got), []int64{warm.EventsKeepDefault + 10}) {
		t.Fatalf("r2 after deleting r1: %v", eventIDs(got))
	}
}

// testEventsConcurrent: writers appending to one run's feed at once (as
// several drainers may) lose no event.
func testEventsConcurrent(t *testing.T, s warm.Store) {
	ctx := ctxT(t)
	const writers, perWriter = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := int64(w*perWriter + i + 1)
				errs <- s.AppendEvents(ctx, "hot", []*warm.EventEntry{event("hot", id)}, 1000)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "concurrent AppendEvents")
	}
	got, err := s.ListEvents(ctx, "hot", 0)
	must(t, err, "ListEvents hot")
	if !slices.Equal(eventIDs(got), seq(1, writers*perWriter)) {
		t.Fatalf("after concurrent appends: %v, want 1..%d", eventIDs(got), writers*perWriter)
	}
}
