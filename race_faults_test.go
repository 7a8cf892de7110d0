package starflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
)

// TestRaceLaneWriteFailureDoesNotPark: when the completion of a race's
// winning lane fails to commit (the store's error, injected through the
// fault layer) while another lane waits, the attempt ends with that error
// and the run is retried — it does not park on the other lane's wait with
// the winner's work unrecorded (found by the chaos harness, issue 17: the
// run would have waited out the slow lane's hour-long timeout).
func TestRaceLaneWriteFailureDoesNotPark(t *testing.T) {
	rules, err := faultpoint.Parse("op:OnNodeComplete=fail@#1")
	if err != nil {
		t.Fatal(err)
	}
	restore := faultpoint.Set(rules)
	t.Cleanup(restore)
	h := newHarness(t, starflow.Config{})
	h.start()
	d := h.apply(`
name: race-write-fails
steps:
  - id: race
    parallel:
      mode: race
      lanes:
        fast: [{id: quick, pass: fast}]
        slow: [{id: pause, wait: {signal: never, timeout: 1h}}]
`)
	r, err := h.eng.Enqueue(context.Background(), d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := h.eng.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatalf("the run did not end within 30 s (parked on the slow lane's wait?): %v", err)
	}
	if run.Status != starflowtype.RunSucceeded || string(run.Output) != `{"lane":"fast","output":"fast"}` || run.Attempt != 2 {
		t.Fatalf("run %s, attempt %d, output %s; want succeeded in attempt 2 with the fast lane's output", run.Status, run.Attempt, run.Output)
	}
}
