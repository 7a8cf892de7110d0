package starflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/warm/memory"
)

// An engine with a warm tier: the cold store is opened with the mirror's
// hook, Config.Warm names the warm store, and live reads come from it
// while run detail keeps reading the cold store.
func ExampleEngine_LiveRun() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "starflow-example-")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "starflow.db"), Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	live := memory.New()
	defer live.Close()
	eng, err := starflow.New(starflow.Config{Store: store, Warm: live, Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := eng.Apply(ctx, "hello.yaml", []byte("name: hello\nsteps:\n  - id: greet\n    context_set: {greeting: hi}\n")); err != nil {
		fmt.Println(err)
		return
	}
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)
	run, _ := eng.Enqueue(ctx, "hello", nil, nil)
	cold, _ := eng.WaitRun(ctx, run.ID)
	fmt.Println("cold:", cold.Status)

	// The warm entry follows within the drain lag.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if e, err := eng.LiveRun(ctx, run.ID); err == nil && e.Status == string(cold.Status) {
			fmt.Println("warm:", e.Status)
			break
		}
	}
	fmt.Println("health:", eng.Health(ctx).Warm)
	// Output:
	// cold: succeeded
	// warm: succeeded
	// health: ok
}
