package starflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// A run pauses durably at a `wait` step — parked in the database, holding
// no runner — until a signal wakes it; the signal's payload is the step's
// output.
func ExampleEngine_Signal() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "starflow-example")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "starflow.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	_ = store.Migrate(ctx)
	eng, _ := starflow.New(starflow.Config{Store: store, Logger: quietLogger()})
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)

	_, err = eng.Apply(ctx, "refund.yaml", []byte(`name: refund
steps:
  - id: approve
    wait: {signal: decision, timeout: 72h}
  - id: result
    context_set: {approved: "${{ steps.approve.output.approved }}"}
output: "${{ variables.approved }}"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ := eng.Enqueue(ctx, "refund", nil, nil)
	for { // until the run is parked at its wait
		r, _ := store.GetRun(ctx, &state.GetRunParams{ID: run.ID})
		if r.ClaimState == starflowtype.ClaimParked {
			fmt.Println("status:", r.Status, "lease held:", r.LeasedBy != "")
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := eng.Signal(ctx, run.ID, "decision", json.RawMessage(`{"approved": true}`)); err != nil {
		fmt.Println(err)
		return
	}
	done, _ := eng.WaitRun(ctx, run.ID)
	fmt.Println("status:", done.Status, "output:", string(done.Output))
	// Output:
	// status: paused lease held: false
	// status: succeeded output: true
}
