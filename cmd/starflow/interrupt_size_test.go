package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestCLIInterruptLargeRun: SIGINT or SIGTERM to `starflow run` in the
// middle of a for_each of thousands of items with hundreds in flight (and
// thousands of step events to show) makes it exit 130 within its grace
// period plus a small margin, with the run's lease released. Showing the
// events left and stopping the items in flight both fit in the grace.
func TestCLIInterruptLargeRun(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				select { // slow enough to keep hundreds in flight; honours a cancelled call
				case <-time.After(20 * time.Millisecond):
					fmt.Fprint(w, `{"ok": true}`)
				case <-r.Context().Done():
				}
			}))
			defer svc.Close()
			dir := t.TempDir()
			writeFile(t, dir, "wf.yaml", `name: big
steps:
  - id: ship
    for_each:
      items: "${{ lists.range(8000) }}"
      concurrency: 400
      steps:
        - id: note
          context_set: {n: "${{ item }}"}
        - id: call
          service_call: {url: "`+svc.URL+`/${{ item }}"}
          timeout: 1m
`)
			cmd := exec.Command(binary, "run", "wf.yaml", "--db", "big.db", "--max-for-each-concurrency", "400")
			cmd.Dir = dir
			cmd.Env = os.Environ()
			stdout, _ := cmd.StdoutPipe()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 1024)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			done := make(chan error, 1)
			go func() {
				for range lines {
				}
				done <- cmd.Wait()
			}()
			// Interrupt once hundreds of items have called the service.
			deadline := time.Now().Add(60 * time.Second)
			for calls.Load() < 1200 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the run never got going: %d calls; stderr: %s", calls.Load(), stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			signalled := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			const margin = 3 * time.Second
			select {
			case err := <-done:
				took := time.Since(signalled)
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 130 {
					t.Fatalf("exit %v after %s: %s", err, took, stderr.String())
				}
				if took > interruptGrace+margin {
					t.Fatalf("exited %s after %s, over its grace %s + %s", took, sig, interruptGrace, margin)
				}
				t.Logf("%d service calls; exited %s after %s", calls.Load(), took.Round(time.Millisecond), sig)
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("starflow run did not stop within a minute of %s", sig)
			}
			s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "big.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			runs, _ := s.ListRuns(context.Background(), &state.ListRunsParams{})
			if len(runs) != 1 || runs[0].ClaimState != starflowtype.ClaimQueued || runs[0].LeasedBy != "" {
				t.Fatalf("run after %s: %+v", sig, runs[0])
			}
		})
	}
}
