package statetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// testWatchdog: the runner registry, the stuck class of runs in each
// state the store can tell apart, queue heads in claim order, and the
// aggregate counts agreeing with the per-run classes.
func (s *suite) testWatchdog(t *testing.T) {
	t.Run("Runners", s.testRunners)
	t.Run("Classes", s.testStuckClasses)
	t.Run("QueueHead", s.testQueueHead)
	t.Run("QueueDepths", s.testQueueDepths)
}

// testRunners: RunnerSeen upserts, ListRunners filters by liveness and
// workspace, RunnerGone removes.
func (s *suite) testRunners(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	seen := func(p state.RunnerSeenParams) {
		t.Helper()
		if err := h.a.RunnerSeen(h.ctx(), &p); err != nil {
			t.Fatalf("RunnerSeen(%s): %v", p.RunnerID, err)
		}
	}
	list := func(p state.ListRunnersParams) []string {
		t.Helper()
		rs, err := h.a.ListRunners(h.ctx(), &p)
		if err != nil {
			t.Fatalf("ListRunners: %v", err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	seen(state.RunnerSeenParams{RunnerID: runnerA, Pools: []string{"gpu", "cpu"}, Concurrency: 8, RunsHeld: 2, TTL: leaseTTL})
	seen(state.RunnerSeenParams{RunnerID: runnerB, WorkspaceID: "ws-b", TTL: leaseTTL})
	seen(state.RunnerSeenParams{RunnerID: "runner-gone", TTL: time.Millisecond})
	if err := h.a.RunnerSeen(h.ctx(), &state.RunnerSeenParams{RunnerID: "no-ttl"}); err == nil {
		t.Error("RunnerSeen without a TTL: no error")
	}
	eventually(t, "the 1 ms runner to expire", func() bool {
		return slices.Equal(list(state.ListRunnersParams{Live: true}), []string{runnerA, runnerB})
	})
	equal(t, "every runner", dump(list(state.ListRunnersParams{})), dump([]string{runnerA, runnerB, "runner-gone"}))
	equal(t, "runners of ws-b", dump(list(state.ListRunnersParams{WorkspaceID: "ws-b", Live: true})), dump([]string{runnerA, runnerB}))
	equal(t, "runners of ws-c", dump(list(state.ListRunnersParams{WorkspaceID: "ws-c", Live: true})), dump([]string{runnerA}))

	rs, err := h.a.ListRunners(h.ctx(), &state.ListRunnersParams{Live: true})
	if err != nil || len(rs) != 2 {
		t.Fatalf("ListRunners: %v, %v", rs, err)
	}
	a := rs[0]
	if !slices.Equal(a.Pools, []string{"gpu", "cpu"}) || a.Concurrency != 8 || a.RunsHeld != 2 ||
		a.StartedAt.IsZero() || a.LastSeen.Before(a.StartedAt) || !a.ExpiresAt.After(a.LastSeen) {
		t.Errorf("runner a = %+v", a)
	}
	if b := rs[1]; b.Pools == nil || len(b.Pools) != 0 || b.WorkspaceID != "ws-b" {
		t.Errorf("runner b = %+v, want no pools (an empty list) and workspace ws-b", b)
	}
	if !a.Serves("any", "gpu") || !a.Serves("any", "") || a.Serves("any", "tpu") || rs[1].Serves("ws-a", "") || !rs[1].Serves("ws-b", "") {
		t.Error("Serves disagrees with the runners' pools and workspaces")
	}
	seen(state.RunnerSeenParams{RunnerID: runnerA, Pools: []string{"tpu"}, RunsHeld: 5, TTL: leaseTTL})
	rs, _ = h.a.ListRunners(h.ctx(), &state.ListRunnersParams{Live: true})
	if !slices.Equal(rs[0].Pools, []string{"tpu"}) || rs[0].RunsHeld != 5 || !rs[0].StartedAt.Equal(a.StartedAt) {
		t.Errorf("runner a after a second heartbeat = %+v (started %v before)", rs[0], a.StartedAt)
	}
	if err := h.a.RunnerGone(h.ctx(), runnerA); err != nil {
		t.Fatalf("RunnerGone: %v", err)
	}
	if err := h.a.RunnerGone(h.ctx(), "never-seen"); err != nil {
		t.Fatalf("RunnerGone of an unknown runner: %v", err)
	}
	equal(t, "runners after a's stop", dump(list(state.ListRunnersParams{Live: true})), dump([]string{runnerB}))
}

// testStuckClasses: each class the store decides, and StuckCounts
// counting the same.
func (s *suite) testStuckClasses(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	want := map[string]string{} // run id → class

	queued := h.enqueue(&state.EnqueueRunParams{RunnerPool: "gpu"})
	want[queued.ID] = state.ClassQueued
	delayed := h.enqueue(&state.EnqueueRunParams{Delay: time.Hour})
	want[delayed.ID] = state.ClassDelayed

	// A running run with a fresh lease is not stuck; one of its steps
	// between two tries is.
	running, l := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	want[running.ID] = state.ClassNone
	h.nodeStart(stepKey(running, "", "a"), l, 1)
	retrying, rl := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	rk := stepKey(retrying, "lane", "flaky")
	h.nodeStart(rk, rl, 1)
	if err := h.a.OnNodeRetry(h.ctx(), &state.NodeRetryParams{StepKey: rk, Lease: rl, Try: 1, Error: "503", Backoff: time.Minute}); err != nil {
		t.Fatalf("OnNodeRetry: %v", err)
	}
	want[retrying.ID] = state.ClassRetryStep

	stale := h.enqueue(nil)
	h.claimExpired(stale.ID)
	want[stale.ID] = state.ClassLeaseStale

	cancelled, cl := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	h.nodeStart(stepKey(cancelled, "", "slow"), cl, 1)
	if _, err := h.a.CancelRun(h.ctx(), &state.CancelRunParams{RunID: cancelled.ID}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	want[cancelled.ID] = state.ClassCancelRequested

	paused, pl := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	h.waitOn(stepKey(paused, "", "approve"), pl, state.RegisterWaitParams{Kind: starflowtype.WaitApproval, Signal: "approve"})
	want[paused.ID] = state.ClassWaitingApproval
	timer, tl := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	h.waitOn(stepKey(timer, "", "sleep"), tl, state.RegisterWaitParams{Kind: starflowtype.WaitTimer, WakeIn: time.Hour})
	want[timer.ID] = state.ClassWaitingTimer

	manual := h.enqueue(&state.EnqueueRunParams{RecoveryMode: starflowtype.RecoveryManual})
	h.claimExpired(manual.ID)
	retried := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 3})
	h.claimExpired(retried.ID)
	if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatalf("ExpireOldLeases: %v", err)
	}
	want[manual.ID] = state.ClassInterrupted
	want[retried.ID] = state.ClassRetryRun
	// The sweep also took the stale run: it is now a run-level retry.
	want[stale.ID] = state.ClassRetryRun

	done, dl := h.claimStartOwn(h.enqueue(nil).ID, runnerA)
	if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: done.ID, Lease: dl, Output: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("OnRunComplete: %v", err)
	}
	want[done.ID] = state.ClassNone

	// A stale lease again, after the sweep.
	stale2 := h.enqueue(nil)
	h.claimExpired(stale2.ID)
	want[stale2.ID] = state.ClassLeaseStale

	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	rows, err := h.a.RunsStuck(h.ctx(), &state.RunsStuckParams{RunIDs: append(ids, "not-a-uuid")})
	if err != nil {
		t.Fatalf("RunsStuck: %v", err)
	}
	if len(rows) != len(want) {
		t.Fatalf("RunsStuck returned %d rows for %d runs", len(rows), len(want))
	}
	byID := map[string]*state.StuckRow{}
	for _, r := range rows {
		byID[r.RunID] = r
		if r.Class != want[r.RunID] {
			t.Errorf("run %s: class %q, want %q", r.RunID, r.Class, want[r.RunID])
		}
		if (r.Class == state.ClassNone) != r.Since.IsZero() {
			t.Errorf("run %s (%q): since %v", r.RunID, r.Class, r.Since)
		}
	}
	if r := byID[retrying.ID]; r.StepID != "flaky" || r.StepScopePath != "lane" || r.StepTries != 1 ||
		r.RetryBackoff != time.Minute || r.RetryAt.IsZero() {
		t.Errorf("retrying run: %+v", r)
	}
	if r := byID[cancelled.ID]; r.StepID != "slow" || r.LeasedBy != runnerA {
		t.Errorf("cancel-requested run: step %q runner %q", r.StepID, r.LeasedBy)
	}
	if r := byID[paused.ID]; r.WaitKind != starflowtype.WaitApproval || r.WaitSignal != "approve" || r.WaitStepID != "approve" {
		t.Errorf("approval run: %+v", r)
	}
	if r := byID[timer.ID]; r.WaitWakeAt.IsZero() || r.WaitWakeAt.Before(r.Since.Add(59*time.Minute)) {
		t.Errorf("timer run: wake at %v, since %v", r.WaitWakeAt, r.Since)
	}
	if r := byID[queued.ID]; r.Pool != "gpu" || !r.Since.Equal(r.AvailableAt) {
		t.Errorf("queued run: pool %q since %v available %v", r.Pool, r.Since, r.AvailableAt)
	}
	if r := byID[manual.ID]; r.RecoveryMode != starflowtype.RecoveryManual || r.Error != "runner_lost" || r.Status != starflowtype.RunInterrupted {
		t.Errorf("manual run: %+v", r)
	}
	if r := byID[stale2.ID]; r.LeasedBy != runnerA || r.LastHeartbeat.IsZero() {
		t.Errorf("stale run: runner %q heartbeat %v", r.LeasedBy, r.LastHeartbeat)
	}

	buckets := []float64{60, 3600}
	counts, err := h.a.StuckCounts(h.ctx(), &state.StuckCountsParams{Buckets: buckets})
	if err != nil {
		t.Fatalf("StuckCounts: %v", err)
	}
	got, wantN := map[string]int64{}, map[string]int64{}
	for _, c := range counts {
		got[c.Class] += c.Count
		if c.Bucket != 0 {
			t.Errorf("count %+v: bucket %d, want 0 (every run is younger than a minute)", c, c.Bucket)
		}
		if (c.Class == state.ClassQueued) != (c.Pool != "" || c.WorkspaceID != "") {
			t.Errorf("count %+v: a queued count names its workspace and pool, no other does", c)
		}
		if c.AgeSum < 0 {
			t.Errorf("count %+v: negative age", c)
		}
	}
	for _, c := range want {
		if c != state.ClassNone {
			wantN[c]++
		}
	}
	equal(t, "StuckCounts by class", dump(got), dump(wantN))
}

// testQueueHead: the claimable runs of one workspace, env and pool, in
// claim order (priority, then available_at, then insertion).
func (s *suite) testQueueHead(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	low := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq", RunnerPool: "p"})
	high := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq", RunnerPool: "p", Priority: 5})
	low2 := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq", RunnerPool: "p"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq", RunnerPool: "other"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wq", RunnerPool: "p", Delay: time.Hour})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "other", RunnerPool: "p"})
	head := func(limit int) []string {
		t.Helper()
		qs, err := h.a.QueueHead(h.ctx(), &state.QueueHeadParams{WorkspaceID: "wq", Env: state.DefaultEnv, Pool: "p", Limit: limit})
		if err != nil {
			t.Fatalf("QueueHead: %v", err)
		}
		var ids []string
		for _, q := range qs {
			ids = append(ids, q.ID)
		}
		return ids
	}
	equal(t, "queue of pool p", dump(head(0)), dump([]string{high.ID, low.ID, low2.ID}))
	equal(t, "its first two", dump(head(2)), dump([]string{high.ID, low.ID}))
	qs, err := h.a.QueueHead(h.ctx(), &state.QueueHeadParams{WorkspaceID: "wq", Env: state.DefaultEnv})
	if err != nil || len(qs) != 1 {
		t.Fatalf("queue of no pool: %v, %v", qs, err)
	}
}

// testQueueDepths: the claimable runs by pool (delayed and claimed runs
// left out), in every workspace or one, with the oldest one's age.
func (s *suite) testQueueDepths(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	depths := func(workspace string) map[string]*state.QueueDepth {
		t.Helper()
		ds, err := h.a.QueueDepths(h.ctx(), &state.QueueDepthsParams{WorkspaceID: workspace})
		if err != nil {
			t.Fatalf("QueueDepths(%q): %v", workspace, err)
		}
		out := map[string]*state.QueueDepth{}
		for _, d := range ds {
			if out[d.Pool] != nil {
				t.Fatalf("QueueDepths(%q): pool %q twice", workspace, d.Pool)
			}
			out[d.Pool] = d
		}
		return out
	}
	if got := depths(""); len(got) != 0 {
		t.Fatalf("QueueDepths of an empty store = %s, want none", dump(got))
	}
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "p"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "p"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "other", RunnerPool: "p"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd"})
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "p", Delay: time.Hour}) // not claimable yet
	h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "delayed", Delay: time.Hour})
	claimed := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "busy"})
	claimOne := func(r *starflowtype.Run) {
		t.Helper()
		c, err := h.a.ClaimRun(h.ctx(), &state.ClaimRunParams{RunnerID: "r1", Pools: []string{r.RunnerPool}, RunID: r.ID, LeaseTTL: leaseTTL})
		if err != nil || c == nil || c.ID != r.ID {
			t.Fatalf("ClaimRun(%s) = %v, %v", r.ID, c, err)
		}
	}
	claimOne(claimed)
	last := h.enqueue(&state.EnqueueRunParams{WorkspaceID: "wd", RunnerPool: "late"})

	counts := func(m map[string]*state.QueueDepth) map[string]int64 {
		out := map[string]int64{}
		for pool, d := range m {
			out[pool] = d.Count
			if d.OldestAgeSeconds < 0 || d.OldestAgeSeconds > 3600 {
				t.Errorf("pool %q: oldest age %g s, want within [0, 3600]", pool, d.OldestAgeSeconds)
			}
		}
		return out
	}
	all := depths("")
	equal(t, "QueueDepths of every workspace", dump(counts(all)), dump(map[string]int64{"p": 3, "": 1, "late": 1}))
	equal(t, "QueueDepths of workspace wd", dump(counts(depths("wd"))), dump(map[string]int64{"p": 2, "": 1, "late": 1}))
	if all["p"] != nil && all["late"] != nil && all["p"].OldestAgeSeconds < all["late"].OldestAgeSeconds {
		t.Errorf("pool p's oldest run (enqueued first) is %g s old, younger than pool late's (enqueued last, %g s)",
			all["p"].OldestAgeSeconds, all["late"].OldestAgeSeconds)
	}
	// Claimed, the run leaves its queue.
	claimOne(last)
	if _, ok := depths("")["late"]; ok {
		t.Errorf("pool late still counted after its only run was claimed")
	}
}
