package starflow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

func wait(t *testing.T, eng *starflow.Engine, id string) *starflowtype.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := eng.WaitRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOperatorResume: a manual-mode run held after a retryable failure is
// resumed by an operator; the committed step is restored, not re-run; a
// resume onto an incompatible current revision is refused; onto the
// pinned one it completes.
func TestOperatorResume(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	n := recordStep(t, h, nil)
	var broken atomic.Bool
	broken.Store(true)
	h.eng.RegisterStep("flaky", func(context.Context, *step.Request) (any, error) {
		if broken.Load() {
			return nil, errors.New("downstream unavailable")
		}
		return "ok", nil
	})
	h.start()
	const v1 = "name: held\nrecovery_mode: manual\nsteps:\n  - id: one\n    record: {label: a}\n  - id: two\n    flaky: {}\n    retry_policy: {max_attempts: 1}\n"
	run := h.runToEnd(v1, nil)
	if run.Status != starflowtype.RunInterrupted || run.ClaimState != starflowtype.ClaimAbandoned {
		t.Fatalf("manual run after a failure: %s/%s", run.Status, run.ClaimState)
	}
	ctx := context.Background()
	// An incompatible new revision: step one is gone.
	h.apply("name: held\nrecovery_mode: manual\nsteps:\n  - id: renamed\n    record: {label: a}\n  - id: two\n    flaky: {}\n")
	if _, err := h.eng.Resume(ctx, run.ID, &starflow.ResumeOptions{Revision: starflow.RevisionCurrent}); !errors.Is(err, starflowtype.ErrRevisionMismatch) {
		t.Fatalf("resume onto an incompatible revision: %v, want revision_mismatch", err)
	}
	broken.Store(false)
	r, err := h.eng.Resume(ctx, run.ID, &starflow.ResumeOptions{Revision: starflow.RevisionPinned})
	if err != nil || r.Attempt != 2 || r.Status != starflowtype.RunQueued {
		t.Fatalf("resume: %+v %v", r, err)
	}
	final := wait(t, h.eng, run.ID)
	if final.Status != starflowtype.RunSucceeded || final.WorkflowRevision != run.WorkflowRevision {
		t.Fatalf("after resume: %s on %s", final.Status, final.WorkflowRevision)
	}
	if n.Load() != 1 {
		t.Fatalf("step one executed %d times, want 1 (restored on resume)", n.Load())
	}
	if _, err := h.eng.Resume(ctx, run.ID, nil); !errors.Is(err, starflowtype.ErrConflict) {
		t.Fatalf("resume of a succeeded run: %v, want ErrConflict", err)
	}
	// Retrigger replays it from the first step.
	if _, err := h.eng.Retrigger(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if again := wait(t, h.eng, run.ID); again.Status != starflowtype.RunSucceeded || again.Attempt != 3 || n.Load() != 2 {
		t.Fatalf("after retrigger: %s attempt %d, record ran %d times", again.Status, again.Attempt, n.Load())
	}
}

func TestOperatorResumeNoCheckpoint(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.start()
	run := h.runToEnd("name: nothing\nrecovery_mode: manual\nsteps:\n  - id: a\n    fail: {message: no}\n", nil)
	if run.Status != starflowtype.RunFailed {
		t.Fatalf("setup: %s", run.Status)
	}
	if _, err := h.eng.Resume(context.Background(), run.ID, nil); !errors.Is(err, starflowtype.ErrNoCheckpoint) {
		t.Fatalf("resume without a checkpoint: %v, want no_checkpoint", err)
	}
	if _, err := h.eng.Resume(context.Background(), run.ID, &starflow.ResumeOptions{Mode: starflowtype.RecoveryReplay}); err != nil {
		t.Fatalf("replay resume: %v", err)
	}
}

// TestOperatorCancelRunning: a running run stops at its next step
// boundary; the step in flight finishes; later steps never start.
func TestOperatorCancelRunning(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	n := recordStep(t, h, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	h.eng.RegisterStep("hold", func(ctx context.Context, _ *step.Request) (any, error) {
		close(entered)
		<-release
		return "held", nil
	})
	h.start()
	d := h.apply("name: cancellable\nsteps:\n  - id: a\n    hold: {}\n  - id: b\n    record: {label: never}\n")
	ctx := context.Background()
	run, err := h.eng.Enqueue(ctx, d.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	c, err := h.eng.Cancel(ctx, run.ID)
	if err != nil || !c.CancelRequested {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	close(release)
	final := wait(t, h.eng, run.ID)
	if final.Status != starflowtype.RunCancelled || n.Load() != 0 {
		t.Fatalf("after cancel: %s, step b ran %d times", final.Status, n.Load())
	}
	steps := h.steps(run.ID)
	if len(steps) != 1 || steps[0].Status != starflowtype.StepSucceeded {
		t.Fatalf("ledger after cancel: %+v", steps)
	}
	if _, err := h.eng.Cancel(ctx, run.ID); !errors.Is(err, starflowtype.ErrConflict) {
		t.Fatalf("second cancel: %v", err)
	}
}

// TestPlan lists in-flight runs that can and cannot move onto a new
// revision, with the reason, and writes nothing.
func TestPlan(t *testing.T) {
	h := newHarness(t, starflow.Config{})
	h.eng.RegisterStep("flaky", func(context.Context, *step.Request) (any, error) {
		return nil, errors.New("downstream unavailable") // transient
	})
	h.start()
	const v1 = "name: planned\nrecovery_mode: manual\nsteps:\n  - id: one\n    context_set: {x: 1}\n  - id: two\n    flaky: {}\n    retry_policy: {max_attempts: 1}\n"
	held := h.runToEnd(v1, nil)
	if held.Status != starflowtype.RunInterrupted {
		t.Fatalf("setup: %s", held.Status)
	}
	ctx := context.Background()
	plan := func(src string) *starflow.Plan {
		t.Helper()
		p, err := h.eng.Plan(ctx, "next.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	same := plan(v1)
	if same.Changed || len(same.Movable) != 1 || len(same.Blocked) != 0 {
		t.Fatalf("plan of the current revision: %+v", same)
	}
	ok := plan("name: planned\nsteps:\n  - id: one\n    context_set: {x: 2}\n  - id: three\n    context_set: {y: 1}\n")
	if !ok.Changed || len(ok.Movable) != 1 || ok.Movable[0].RunID != held.ID || len(ok.Blocked) != 0 {
		t.Fatalf("compatible plan: %+v", ok)
	}
	renamed := plan("name: planned\nsteps:\n  - id: renamed\n    context_set: {x: 2}\n")
	if len(renamed.Blocked) != 1 || !strings.Contains(renamed.Blocked[0].Reason, `completed step "one" is missing`) {
		t.Fatalf("renamed step: %+v", renamed)
	}
	kind := plan("name: planned\nsteps:\n  - id: one\n    flaky: {}\n")
	if len(kind.Blocked) != 1 || !strings.Contains(kind.Blocked[0].Reason, "ran as context_set") {
		t.Fatalf("changed kind: %+v", kind)
	}
	fresh := plan("name: brand-new\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	if fresh.CurrentRevision != "" || !fresh.Changed {
		t.Fatalf("new workflow: %+v", fresh)
	}
	if _, err := h.eng.Enqueue(ctx, "brand-new", nil, nil); !errors.Is(err, starflowtype.ErrNotFound) {
		t.Fatalf("plan applied something: %v", err)
	}
}
