package statetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// sessionSet writes a session variable for run with lease l.
func (h *harness) sessionSet(run string, l starflowtype.Lease, session, key, value string, keep time.Time) *starflowtype.SessionVar {
	h.t.Helper()
	v, err := h.a.SessionSet(h.ctx(), &state.SessionSetParams{SessionID: session, Key: key, Value: json.RawMessage(value),
		RunID: run, Lease: l, KeepUntil: keep})
	if err != nil {
		h.t.Fatalf("SessionSet(%s/%s): %v", session, key, err)
	}
	return v
}

// sessionGet reads a session variable; nil when ErrNotFound.
func (h *harness) sessionGet(session, key string) *starflowtype.SessionVar {
	h.t.Helper()
	v, err := h.a.SessionGet(h.ctx(), &state.SessionGetParams{SessionID: session, Key: key})
	if err != nil {
		wantErrIs(h.t, "SessionGet("+session+"/"+key+")", err, starflowtype.ErrNotFound)
		return nil
	}
	return v
}

// testSessions: session variables are written by a run, read back, dropped
// at the run's end unless kept, and collected after keep_until.
func (s *suite) testSessions(t *testing.T) {
	t.Parallel()

	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		keep := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		v := h.sessionSet(run.ID, l, "cust-1", "cart", `{"items":[1,2]}`, time.Time{})
		equal(t, "origin_run_id", v.OriginRunID, run.ID)
		equal(t, "workspace_id", v.WorkspaceID, state.DefaultWorkspace)
		near(t, "updated_at", v.UpdatedAt, time.Now(), clockSlack)
		h.sessionSet(run.ID, l, "cust-1", "cart", `{"items":[1,2,3]}`, time.Time{}) // overwrite
		h.sessionSet(run.ID, l, "cust-1", "tier", `"gold"`, keep)
		h.sessionSet(run.ID, l, "cust-2", "cart", `[]`, time.Time{})

		got := h.sessionGet("cust-1", "cart")
		if got == nil {
			t.Fatal("cart not found")
		}
		jsonEqual(t, "cart", got.Value, `{"items":[1,2,3]}`)
		if h.sessionGet("cust-1", "missing") != nil {
			t.Error("a key never written was found")
		}
		tier := h.sessionGet("cust-1", "tier")
		if tier == nil || !tier.KeepUntil.Equal(keep) {
			t.Fatalf("tier = %+v, want keep_until %v", tier, keep)
		}

		// The run ends: its own variables without keep_until go.
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		if h.sessionGet("cust-1", "cart") != nil || h.sessionGet("cust-2", "cart") != nil {
			t.Error("variables without keep_until survived their run's end")
		}
		if h.sessionGet("cust-1", "tier") == nil {
			t.Fatal("the keep_until variable did not survive its run's end")
		}

		// A second run reads it, and a variable another run wrote is not
		// dropped by this one's end.
		run2, l2 := h.startOwn(runnerB)
		jsonEqual(t, "tier read by a second run", h.sessionGet("cust-1", "tier").Value, `"gold"`)
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run2.ID, Lease: l2, Error: "x"}); err != nil {
			t.Fatal(err)
		}
		if h.sessionGet("cust-1", "tier") == nil {
			t.Error("another run's end dropped the variable")
		}
	})

	t.Run("RetryKeeps", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		// The sweep dead-lettering a run is its end.
		run2 := h.enqueue(&state.EnqueueRunParams{MaxAttempts: 1})
		l2 := h.claimExpired(run2.ID)
		h.sessionSet(run2.ID, l2, "s", "k2", `2`, time.Time{})
		if _, err := h.a.ExpireOldLeases(h.ctx(), &state.ExpireOldLeasesParams{}); err != nil {
			t.Fatal(err)
		}
		equal(t, "swept run", h.getRun(run2.ID).Status, starflowtype.RunFailed)
		if h.sessionGet("s", "k2") != nil {
			t.Error("a dead-lettered run's variable survived")
		}
		run, l := h.startOwn(runnerA)
		h.sessionSet(run.ID, l, "s", "k", `1`, time.Time{})
		// A retryable failure with attempts left is not the run's end.
		if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run.ID, Lease: l, Error: "503", Retry: true}); err != nil {
			t.Fatal(err)
		}
		if h.sessionGet("s", "k") == nil {
			t.Error("a retry (not the run's end) dropped the run's variable")
		}
	})

	t.Run("ExpiryAndGC", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		h.sessionSet(run.ID, l, "s", "old", `1`, time.Now().Add(-time.Minute))
		h.sessionSet(run.ID, l, "s", "new", `2`, time.Now().Add(time.Hour))
		h.sessionSet(run.ID, l, "s", "run", `3`, time.Time{})
		if h.sessionGet("s", "old") != nil {
			t.Error("an expired variable was read")
		}
		n, err := h.a.DeleteExpiredSessionVars(h.ctx(), &state.DeleteExpiredSessionVarsParams{})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "variables collected", n, int64(1))
		n, err = h.a.DeleteExpiredSessionVars(h.ctx(), &state.DeleteExpiredSessionVarsParams{})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "variables collected by a second pass", n, int64(0))
		if h.sessionGet("s", "new") == nil || h.sessionGet("s", "run") == nil {
			t.Error("the GC removed a variable that had not expired")
		}
	})

	// keep_until given as a duration is computed by the store from the
	// database's clock, in the same statement that stamps updated_at (SPEC
	// §5; issue 10 item 9): keep_until - updated_at is exactly KeepFor,
	// whatever the runner's clock says.
	t.Run("KeepForOnDatabaseClock", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		const keep = 90 * time.Minute
		v, err := h.a.SessionSet(h.ctx(), &state.SessionSetParams{SessionID: "s", Key: "k", Value: json.RawMessage(`1`),
			RunID: run.ID, Lease: l, KeepFor: keep})
		if err != nil {
			t.Fatal(err)
		}
		if d := v.KeepUntil.Sub(v.UpdatedAt); d < keep-time.Millisecond || d > keep+time.Millisecond {
			t.Fatalf("keep_until - updated_at = %s, want %s (both from the database's now)", d, keep)
		}
		near(t, "keep_until", v.KeepUntil, time.Now().Add(keep), clockSlack)
		got := h.sessionGet("s", "k")
		if got == nil || !got.KeepUntil.Equal(v.KeepUntil) {
			t.Fatalf("read back %+v, want keep_until %v", got, v.KeepUntil)
		}
		if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l}); err != nil {
			t.Fatal(err)
		}
		if h.sessionGet("s", "k") == nil {
			t.Error("a variable kept for 90 minutes did not survive its run's end")
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		h := s.durableWaits(t)
		run, l := h.startOwn(runnerA)
		for _, p := range []state.SessionSetParams{
			{SessionID: "", Key: "k", Value: json.RawMessage(`1`)},
			{SessionID: "s", Key: "", Value: json.RawMessage(`1`)},
			{SessionID: "s", Key: "k", Value: json.RawMessage(`{not json`)},
			{SessionID: "s", Key: "k"},
			{SessionID: "s", Key: "k", Value: json.RawMessage(`1`), KeepFor: -time.Second},
			{SessionID: "s", Key: "k", Value: json.RawMessage(`1`), KeepFor: time.Hour, KeepUntil: time.Now().Add(time.Hour)},
		} {
			p.RunID, p.Lease = run.ID, l
			if _, err := h.a.SessionSet(h.ctx(), &p); err == nil {
				t.Errorf("SessionSet(%q, %q, %q): no error", p.SessionID, p.Key, p.Value)
			}
		}
	})
}

// testWakeKeys: a wake key is registered once per id, by id and
// fingerprint (the first fingerprint stays), listed newest first; a secret
// is never accepted (issue 10 item 1).
func (s *suite) testWakeKeys(t *testing.T) {
	t.Parallel()
	h := s.durableWaits(t)
	keys, err := h.a.WakeKeys(h.ctx())
	if err != nil || len(keys) != 0 {
		t.Fatalf("WakeKeys of an empty store = %v, %v", keys, err)
	}
	fp1, fp2 := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	k1, err := h.a.AddWakeKey(h.ctx(), state.WakeKey{ID: "k1", Fingerprint: fp1})
	if err != nil {
		t.Fatal(err)
	}
	if k1.ID != "k1" || k1.Fingerprint != fp1 {
		t.Errorf("AddWakeKey = %+v", k1)
	}
	near(t, "created_at", k1.CreatedAt, time.Now(), clockSlack)
	again, err := h.a.AddWakeKey(h.ctx(), state.WakeKey{ID: "k1", Fingerprint: fp2})
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint != fp1 {
		t.Error("AddWakeKey of a registered id replaced its fingerprint; want the first one returned (the caller detects the mismatch)")
	}
	time.Sleep(5 * time.Millisecond) // distinct created_at (milliseconds on SQLite)
	if _, err := h.a.AddWakeKey(h.ctx(), state.WakeKey{ID: "k2", Fingerprint: fp2}); err != nil {
		t.Fatal(err)
	}
	keys, err = h.a.WakeKeys(h.ctx())
	if err != nil || len(keys) != 2 || keys[0].ID != "k2" || keys[1].ID != "k1" || keys[1].Fingerprint != fp1 {
		t.Errorf("WakeKeys = %+v, %v; want k2 then k1", keys, err)
	}
	for _, bad := range []state.WakeKey{
		{ID: "", Fingerprint: fp1},
		{ID: "short", Fingerprint: "abc"},
		{ID: "upper", Fingerprint: strings.ToUpper(fp1)},
		{ID: "secret", Fingerprint: strings.Repeat("x", 64)},
		{ID: "none"},
	} {
		if _, err := h.a.AddWakeKey(h.ctx(), bad); err == nil {
			t.Errorf("AddWakeKey(%+v): no error", bad)
		}
	}
}
