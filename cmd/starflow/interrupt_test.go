package main

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
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

// TestCLIInterruptReleasesLease sends SIGINT to `starflow run` while a step
// is in flight: the process exits 130 within its short grace and the run's
// lease is released (claim_state queued) for a worker to continue.
func TestCLIInterruptReleasesLease(t *testing.T) {
	t.Parallel()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hang.Close()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", "name: slow\nsteps:\n  - id: a\n    context_set: {x: 1}\n"+
		"  - id: call\n    service_call: {url: \""+hang.URL+"\"}\n    timeout: 1m\n")
	cmd := exec.Command(binary, "run", "wf.yaml", "--db", "i.db")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "✓ a") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var rest strings.Builder
	go func() {
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 130 || !strings.Contains(rest.String(), "interrupted; its lease was released") ||
			!strings.Contains(stderr.String(), "starflow worker --store sqlite://i.db") {
			t.Fatalf("exit %v: %s%s", err, rest.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("starflow run did not stop after SIGINT")
	}
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "i.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, _ := s.ListRuns(context.Background(), &state.ListRunsParams{})
	if len(runs) != 1 || runs[0].ClaimState != starflowtype.ClaimQueued || runs[0].LeasedBy != "" {
		t.Fatalf("run after interrupt: %+v", runs[0])
	}
}
