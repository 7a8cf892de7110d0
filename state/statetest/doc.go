// Package statetest is the conformance suite of the cold-tier contract
// (SPEC §4): every state.Adapter implementation calls Run (or RunOpener)
// from its own tests, with a fresh, migrated adapter per test, and must
// pass every case that applies to it. The model is River's
// riverdrivertest.
//
//	func TestConformance(t *testing.T) {
//		statetest.RunOpener(t, func(t *testing.T, hooks []state.TxHook) state.Adapter {
//			s, err := sqlitestore.Open(sqlitestore.Config{
//				Path:  filepath.Join(t.TempDir(), "starflow.db"),
//				Hooks: hooks,
//			})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = s.Close() })
//			if err := s.Migrate(t.Context()); err != nil {
//				t.Fatal(err)
//			}
//			return s
//		}, statetest.Options{})
//	}
//
// Every adapter runs every case but the close-and-reopen one, which runs
// only when Options.Reopen is set (a durable adapter): a non-durable
// adapter (nullstore, SQLite in memory) keeps what it writes until it is
// closed, and must behave as the durable ones do until then. Hooks write
// through the store's typed state.HookTx.
//
// Contract details the suite pins down beyond the method comments of
// state.Adapter:
//   - the payload of node_start, node_retry and node_complete events, and of
//     node_error when the caller gives none, is a JSON object with a "try"
//     number; the payload of a phase event has a "phase" string;
//   - ListRuns orders by (created_at, id) descending, so runs sharing a
//     created_at (enqueued within the store's time precision) come by id;
//   - a succeeded step is final within its attempt: any further step write
//     about it returns ErrConflict and writes nothing (its checkpoint
//     stands), while skipped and failed steps may be recorded again, as a
//     run continued in the same attempt after a graceful release does;
//   - OnNodeError of a step that never started records a failed row;
//   - OnNodeError with Cancelled records the row cancelled (a never
//     started one too) with node_error's default payload holding
//     "cancelled": true, even after an operator's cancel request; a later
//     try starts a cancelled row again as it does a failed one;
//   - OnRunError stores ErrorJSON (a JSON object; empty or null is none,
//     anything else is refused and nothing written) as the run's
//     ErrorDetail on every end, every run read returns it, every write
//     that clears the run's error clears it, the sweep's reason has none,
//     and a child's end hands it to its parent as the payload's
//     error_detail (omitted when the child has none);
//   - OnRunError with Retry in recovery mode manual leaves the run
//     interrupted, unleased and not claimable;
//   - EnqueueRun with an existing id returns ErrConflict;
//   - a run's Depth is 0 without a parent, else its parent's Depth + 1,
//     read from the parent's row (1 when that row is gone); CancelRun,
//     OnRunCancelled and a cancel at ParkRun reach every non-terminal
//     descendant, however deep the tree;
//   - a ClaimRun that finds no run runs no hook; RecordPhaseIfChanged("")
//     on a run without a phase appends no event;
//   - durable waits follow the details listed on state.Waiter (resume
//     writes run_resumed, inbox matching order, payload shapes, wakes an
//     interrupted attempt never resumed go back to the inbox, a cancel
//     requested while entering a wait ends the run at ParkRun); an
//     adapter that is not durable refuses the Waiter writes with
//     state.ErrNotImplemented and SessionSet too.
//
// Import rule: statetest imports the standard library, starflowtype,
// state and internal/faultpoint (RunFaults); never an adapter (adapters
// import statetest from their tests) and never the engine.
package statetest
