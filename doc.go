// Package starflow is a durable workflow engine. A workflow is a
// declarative graph of steps written in YAML or JSON (package workflow);
// each run of it commits a checkpoint per step to a cold store (package
// state: SQLite embedded, PostgreSQL across machines), is executed by
// runners that hold fenced leases, and survives the crash of the process
// that executes it.
//
// The Engine is the embedding API: open it on a store, register custom
// step types, apply definitions, enqueue runs, start the in-process
// runner, and wait for runs:
//
//	store, _ := sqlitestore.Open(sqlitestore.Config{Path: "starflow.db"})
//	_ = store.Migrate(ctx)
//	eng, _ := starflow.New(starflow.Config{Store: store})
//	_ = eng.RegisterStep("charge_card", chargeCard)
//	def, _ := eng.Apply(ctx, "order.yaml", source)
//	run, _ := eng.Enqueue(ctx, def.Name, map[string]any{"sku": "A1"}, nil)
//	_ = eng.Start(ctx)
//	defer eng.Stop(ctx)
//	run, _ = eng.WaitRun(ctx, run.ID)
//
// Import rule: the root package imports the library packages (state,
// starflowtype, step, workflow, internal/...) but never a concrete store;
// only cmd/ and embedders pick one.
package starflow
