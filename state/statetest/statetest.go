package statetest

import (
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// Opener opens a fresh, empty, migrated adapter for one test, with hooks
// installed as state.TxHooks of its write transactions (hooks may be
// empty). It registers the adapter's Close with t.Cleanup and fails t (not
// returns an error) when it cannot open. Each call must return an adapter
// that shares no rows with any other call's, so that tests can run in
// parallel: a temporary SQLite file, a PostgreSQL schema, and so on.
type Opener func(t *testing.T, hooks []state.TxHook) state.Adapter

// Reopener closes a, which an Opener returned, and opens the same storage
// again with the same hooks, as a restarted process would. It returns the
// new adapter (migrated, with Close registered with t.Cleanup).
type Reopener func(t *testing.T, a state.Adapter, hooks []state.TxHook) state.Adapter

// Options are the optional abilities of the adapter under test that
// Capabilities cannot describe.
type Options struct {
	// Reopen, when set, enables the durability case that closes the
	// adapter and reads everything back from a new one on the same
	// storage. Only durable adapters need it; without it that case is
	// skipped.
	Reopen Reopener
	// Share, when set, opens a second adapter on the storage of a (which
	// an Opener returned) without closing a, as a second process would
	// (registering its Close with t.Cleanup). The leader-election cases
	// then campaign from both; without it, from two candidates of a.
	Share func(t *testing.T, a state.Adapter) state.Adapter
	// SetCreatedAt, when set, sets the created_at of runs ids (of a,
	// which an Opener returned) to at, a whole millisecond, as if they
	// had been enqueued at that instant (PostgreSQL stamps every run of
	// one transaction with its start). The listing cases then page
	// through runs that share a created_at; without it they are skipped.
	SetCreatedAt func(t *testing.T, a state.Adapter, at time.Time, ids ...string)
	// Backdate, when set, moves every BackdateColumns column of every row
	// of a (which an Opener returned) back by `by` (NULL stays NULL), as
	// if all of it had happened that much earlier. The retention cases
	// then age rows around the thresholds; without it they are skipped.
	Backdate func(t *testing.T, a state.Adapter, by time.Duration)
}

// Run runs the conformance suite against the adapters open returns (one
// fresh adapter per test). The hook cases need an opener that installs
// hooks, so Run skips them; use RunOpener to run them too.
func Run(t *testing.T, open func(t *testing.T) state.Adapter) {
	t.Helper()
	RunOpener(t, func(t *testing.T, hooks []state.TxHook) state.Adapter {
		if len(hooks) > 0 {
			t.Skip("statetest: the opener given to Run installs no hooks; call RunOpener to run the hook cases")
		}
		return open(t)
	}, Options{})
}

// RunOpener runs the whole conformance suite against the adapters open
// returns, one fresh adapter per test, as parallel subtests grouped by
// topic. Cases that need an ability the adapter lacks are skipped with the
// reason (see the package documentation).
func RunOpener(t *testing.T, open Opener, opts Options) {
	t.Helper()
	s := &suite{open: open, opts: opts}
	t.Run("Definitions", s.testDefinitions)
	t.Run("Enqueue", s.testEnqueue)
	t.Run("Claim", s.testClaim)
	t.Run("Fencing", s.testFencing)
	t.Run("Steps", s.testSteps)
	t.Run("WithStart", s.testWithStart)
	t.Run("GroupCommit", s.testGroupCommit)
	t.Run("RunComplete", s.testRunComplete)
	t.Run("RunError", s.testRunError)
	t.Run("ClearLease", s.testClearLease)
	t.Run("AttemptDuration", s.testAttemptDuration)
	t.Run("Phase", s.testPhase)
	t.Run("IdempotentEnqueue", s.testIdempotentEnqueue)
	t.Run("ClaimByID", s.testClaimByID)
	t.Run("Operator", s.testOperator)
	t.Run("JSONKeptAsWritten", s.testJSONKeptAsWritten)
	t.Run("Blobs", s.testBlobs)
	t.Run("ExpireOldLeases", s.testExpireOldLeases)
	t.Run("Hooks", s.testHooks)
	t.Run("Outbox", s.testOutbox)
	t.Run("Lists", s.testLists)
	t.Run("RunListing", s.testRunListing)
	t.Run("API", s.testAPI)
	t.Run("Durability", s.testDurability)
	t.Run("Waits", s.testWaits)
	t.Run("Sessions", s.testSessions)
	t.Run("WakeKeys", s.testWakeKeys)
	t.Run("Leader", s.testLeader)
	t.Run("Watchdog", s.testWatchdog)
	t.Run("TypedErrors", s.testTypedErrors)
	t.Run("Jobs", s.testJobs)
	t.Run("Webhooks", s.testWebhooks)
	t.Run("Schedules", s.testSchedules)
	t.Run("Retention", s.testRetention)
	t.Run("Trace", s.testTrace)
	t.Run("Children", s.testChildren)
}

// suite carries the opener to every case.
type suite struct {
	open Opener
	opts Options
}

// adapter opens a fresh adapter for t (any adapter, durable or not).
func (s *suite) adapter(t *testing.T, hooks ...state.TxHook) *harness {
	t.Helper()
	a := s.open(t, hooks)
	if a == nil {
		t.Fatal("statetest: the opener returned a nil adapter")
	}
	return &harness{t: t, a: a, caps: a.Capabilities()}
}

// stored opens a fresh adapter for a case that reads back what it wrote.
// Every adapter keeps what it writes until it is closed (nullstore in
// memory), so none is skipped; only the close-and-reopen case needs a
// durable one.
func (s *suite) stored(t *testing.T, hooks ...state.TxHook) *harness {
	t.Helper()
	return s.adapter(t, hooks...)
}
