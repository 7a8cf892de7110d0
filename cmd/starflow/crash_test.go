package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestCrashInsideStepCompletion kills a real `starflow run` process with
// SIGKILL while it is inside the transaction that completes step b — after
// the ledger row was updated, after the event, after the checkpoint, and
// just before commit — and checks that the database holds either all of
// the step's completion or none of it.
func TestCrashInsideStepCompletion(t *testing.T) {
	t.Parallel()
	points := []string{"after_step", "after_event", "after_checkpoint", "before_commit"}
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "wf.yaml", "name: crashy\nsteps:\n"+
				"  - id: a\n    context_set: {x: 1}\n"+
				"  - id: b\n    context_set: {y: 2}\n"+
				"  - id: c\n    context_set: {z: 3}\n")
			point := "sqlite.OnNodeComplete." + p
			cmd := exec.Command(binary, "run", "wf.yaml", "--db", "crash.db")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "STARFLOW_FAULTPOINT="+point+"#2")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			reached := make(chan bool, 1)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "faultpoint "+point+" reached") {
						reached <- true
						return
					}
				}
				reached <- false
			}()
			select {
			case ok := <-reached:
				if !ok {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatal("process ended without reaching the fault point")
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("fault point not reached within 60 s")
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			checkConsistent(t, filepath.Join(dir, "crash.db"))
		})
	}
}

// checkConsistent asserts the invariants a crash must never break: the
// file passes SQLite's integrity check; step a is completed (row, event,
// checkpoint); step b's completion is entirely absent; c never started;
// checkpoint count equals succeeded steps.
func checkConsistent(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var integrity string
	if err := s.DB().QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q %v", integrity, err)
	}
	runs, err := s.ListRuns(ctx, &state.ListRunsParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	run := runs[0]
	if run.Status != starflowtype.RunRunning {
		t.Fatalf("run status %s", run.Status)
	}
	steps, _ := s.ListSteps(ctx, &state.ListStepsParams{RunID: run.ID})
	cps, _ := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: run.ID})
	evs, _ := s.ListEvents(ctx, &state.ListEventsParams{RunID: run.ID})
	if len(steps) != 2 || steps[0].Status != starflowtype.StepSucceeded || steps[1].Status != starflowtype.StepRunning {
		t.Fatalf("steps after crash: %+v", steps)
	}
	succeeded := 0
	for _, st := range steps {
		if st.Status == starflowtype.StepSucceeded {
			succeeded++
		}
	}
	if len(cps) != succeeded || cps[0].StepID != "a" {
		t.Fatalf("%d checkpoints for %d succeeded steps", len(cps), succeeded)
	}
	for _, e := range evs {
		if e.NodeID == "b" && e.Type != starflowtype.EventNodeStart {
			t.Fatalf("half-written completion of b: event %s survived", e.Type)
		}
	}
}
