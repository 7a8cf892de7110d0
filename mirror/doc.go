// Package mirror is the bridge from the cold tier to the warm tier (SPEC
// §8): a transactional outbox written by a hook inside every cold write,
// a drainer that applies it to a warm.Store in order per run, drift
// signals (Prometheus metrics and a health answer), a hash-compare sweep
// that repairs missing or divergent warm entries, and end-of-run
// reconciliation.
//
// Assembly (SQL adapters):
//
//	reg := prometheus.NewRegistry()
//	cold, err := pgstore.Open(ctx, pgstore.Config{URL: url, Hooks: []state.TxHook{mirror.Hook()}})
//	// (sqlitestore.Open(sqlitestore.Config{Path: p, Hooks: []state.TxHook{mirror.Hook()}}) likewise)
//	err = cold.Migrate(ctx)                 // creates mirror_outbox
//	m, err := mirror.New(cold, mirror.Config{Warm: ws, Registerer: reg})
//	go m.Run(ctx)                           // drainer, pruner, sweep, gauges; returns when ctx ends
//	// use m (a *mirror.Adapter, a state.Adapter) wherever the cold adapter was used
//	h := m.Health(ctx)                      // {"warm": "ok", "outbox_pending": 0, …}
//	m.Close()                               // waits for reconciliations, closes cold
//
// The hook must be in the adapter's Config.Hooks: a SQL adapter opened
// without it writes no outbox rows, and the warm tier then only learns of
// runs through the sweep. A non-durable adapter (nullstore) has no
// transaction to join, so the mirror writes to the warm store directly
// after each write, best effort (a warm failure loses that update until
// the run's next write; there is no outbox, sweep or lag).
//
// Authority: the warm tier is a hint. Mirror reads (GetRun, ListRuns,
// ListSteps, …) go to the cold adapter; nothing in this package reads warm
// to answer a cold read.
//
// Import rule: state, starflowtype, warm and the Prometheus client; no SQL
// driver (the hook writes through the store's typed state.HookTx), never
// a concrete adapter or warm store outside tests.
package mirror
