package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestCLIInterruptedStepContinuedByWorker (issue 10 item 12): `starflow
// run` is interrupted (SIGINT) while a service_call is in flight; a worker
// continues the run in the same attempt. The call's second start is try 2:
// the ledger row has tries 2 and the events hold one node_start per try,
// {"try":1} and {"try":2}, and one node_complete (try 2).
func TestCLIInterruptedStepContinuedByWorker(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	calls := 0
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first { // the interrupted runner's try: never answered
			once.Do(func() { close(arrived) })
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	defer svc.Close()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: cut\nsteps:\n  - id: call\n    service_call: {url: \""+svc.URL+"\"}\n    timeout: 1m\n")
	cmd := exec.Command(binary, "run", "wf.yaml", "--db", "c.db")
	cmd.Dir, cmd.Env = dir, os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the step's request never arrived")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("starflow run exited 0 after SIGINT")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("starflow run after SIGINT: %v, want exit 130", err)
	}

	w := startDaemon(t, dir, nil, "worker", "--db", "c.db", "--poll-interval", "50ms")
	defer w.stop(t)
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "c.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var run *starflowtype.Run
	for deadline := time.Now().Add(30 * time.Second); ; {
		runs, err := s.ListRuns(ctx, &state.ListRunsParams{})
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs: %v %v", runs, err)
		}
		if run = runs[0]; run.Status == starflowtype.RunSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not finish the run: %+v", run)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if run.Attempt != 1 {
		t.Errorf("attempt %d, want the interrupted attempt 1 continued", run.Attempt)
	}
	steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: run.ID})
	if err != nil || len(steps) != 1 || steps[0].Tries != 2 || steps[0].Status != starflowtype.StepSucceeded {
		t.Fatalf("ledger %+v (%v): want step call succeeded with tries 2", steps, err)
	}
	evs, err := s.ListEvents(ctx, &state.ListEventsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	tries := map[starflowtype.EventType][]int{}
	for _, e := range evs {
		if e.NodeID != "call" {
			continue
		}
		var p struct{ Try int }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("%s payload %s: %v", e.Type, e.Payload, err)
		}
		tries[e.Type] = append(tries[e.Type], p.Try)
	}
	if !slices.Equal(tries[starflowtype.EventNodeStart], []int{1, 2}) || !slices.Equal(tries[starflowtype.EventNodeComplete], []int{2}) {
		t.Errorf("events of call: node_start tries %v, node_complete tries %v; want [1 2] and [2]",
			tries[starflowtype.EventNodeStart], tries[starflowtype.EventNodeComplete])
	}
}
