package main

import (
	"bufio"
	"context"
	"fmt"
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
			killAtFaultpoint(t, dir, "sqlite.OnNodeComplete."+p, 2)
			checkConsistent(t, filepath.Join(dir, "crash.db"))
		})
	}
}

// killAtFaultpoint runs `starflow run wf.yaml --db crash.db` in dir with
// the fault point armed for its hit-th pass and kills the process with
// SIGKILL once it reports the point reached (where it then waits).
func killAtFaultpoint(t *testing.T, dir, point string, hit int) {
	t.Helper()
	cmd := exec.Command(binary, "run", "wf.yaml", "--db", "crash.db")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("STARFLOW_FAULTPOINT=%s#%d", point, hit))
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
			cmd.Wait()
			t.Fatalf("process ended without reaching fault point %s (pass %d)", point, hit)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("fault point %s not reached within 60 s", point)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestCrashInsideBatch kills a real `starflow run` process with SIGKILL
// inside a group commit: a for_each runs its items eight at a time, so
// their step writes are committed together, and the process is stopped
// after a write of a batch of several (sqlite.batch.after_write), before
// the batch commits. Every step instance in the file is then whole or
// absent: a succeeded row has its checkpoint and its node_start and
// node_complete events; nothing else of it exists.
func TestCrashInsideBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: batchy\nsteps:\n"+
		"  - id: items\n    for_each:\n      items: \"${{ lists.range(400) }}\"\n      concurrency: 8\n"+
		"      steps:\n        - id: one\n          context_set: {x: \"${{ item }}\"}\n")
	killAtFaultpoint(t, dir, "sqlite.batch.after_write", 20)

	ctx := context.Background()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "crash.db")})
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
	id := runs[0].ID
	steps, _ := s.ListSteps(ctx, &state.ListStepsParams{RunID: id})
	cps, _ := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: id})
	evs, _ := s.ListEvents(ctx, &state.ListEventsParams{RunID: id})
	key := func(scope, step string) string { return scope + "/" + step }
	succeeded := map[string]bool{}
	for _, st := range steps {
		if st.StepID == "one" {
			if st.Status != starflowtype.StepSucceeded {
				t.Errorf("item step %s is %s: a half-written step write", key(st.ScopePath, st.StepID), st.Status)
			}
			succeeded[key(st.ScopePath, st.StepID)] = true
		}
	}
	if len(succeeded) == 0 || len(succeeded) >= 400 {
		t.Fatalf("%d items succeeded before the crash; want some, not all", len(succeeded))
	}
	ncp := 0
	for _, c := range cps {
		if c.StepID == "one" {
			ncp++
			if !succeeded[key(c.ScopePath, c.StepID)] {
				t.Errorf("checkpoint of %s without its succeeded row", key(c.ScopePath, c.StepID))
			}
		}
	}
	starts, completes := map[string]int{}, map[string]int{}
	for _, e := range evs {
		if e.NodeID != "one" {
			continue
		}
		switch e.Type {
		case starflowtype.EventNodeStart:
			starts[key(e.ScopePath, e.NodeID)]++
		case starflowtype.EventNodeComplete:
			completes[key(e.ScopePath, e.NodeID)]++
		}
	}
	for k := range succeeded {
		if starts[k] != 1 || completes[k] != 1 {
			t.Errorf("%s: %d node_start and %d node_complete events, want one each", k, starts[k], completes[k])
		}
	}
	if len(starts) != len(succeeded) || len(completes) != len(succeeded) || ncp != len(succeeded) {
		t.Errorf("%d rows succeeded, %d checkpoints, %d started and %d completed in events: every part of a write or none",
			len(succeeded), ncp, len(starts), len(completes))
	}
}

// checkConsistent asserts the invariants a crash must never break: the
// file passes SQLite's integrity check; step a is completed (row, events,
// checkpoint); step b, a context_set whose start is written with its
// completion, left nothing at all (no row, no event, no checkpoint); c
// never started; checkpoint count equals succeeded steps.
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
	if len(steps) != 1 || steps[0].StepID != "a" || steps[0].Status != starflowtype.StepSucceeded {
		t.Fatalf("steps after crash: %s", dumpSteps(steps))
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
		if e.NodeID == "b" {
			t.Fatalf("half-written step b: event %s survived", e.Type)
		}
	}
}

func dumpSteps(steps []*starflowtype.Step) string {
	var b strings.Builder
	for _, st := range steps {
		fmt.Fprintf(&b, "[%s %s try %d] ", st.StepID, st.Status, st.Tries)
	}
	return b.String()
}
