package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestCLIRunWaitsForAJob: `starflow run` of a workflow reaching a job step
// says it waits for a worker of the job type, warns that no worker polled
// for it, and continues when a worker (here another process's store, as
// the HTTP server would) completes the job.
func TestCLIRunWaitsForAJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "wf.yaml", `name: thumbs
steps:
  - id: thumb
    job: {type: thumbnail, input: {w: 64}}
output: "${{ steps.thumb.output }}"
`)
	p := startRun(t, dir, "wf.yaml", "--db", "j.db")
	p.until(t, regexp.MustCompile(`⏸ thumb\s+paused\s+waiting for a remote worker of job type thumbnail$`))
	p.until(t, regexp.MustCompile(`it wakes when a worker serving job type thumbnail completes or fails its job`))
	p.until(t, regexp.MustCompile(`! no worker has polled for job type thumbnail in the last 1m0s`))

	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	j, err := store.ClaimJob(ctx, &state.ClaimJobParams{Types: []string{"thumbnail"}, Worker: "test-worker"})
	if err != nil || j == nil {
		t.Fatalf("claim: %v %v", j, err)
	}
	if string(j.Input) != `{"w":64}` {
		t.Fatalf("job input %s", j.Input)
	}
	if _, err := store.CompleteJob(ctx, &state.CompleteJobParams{ID: j.ID, Token: j.LeaseToken, Output: json.RawMessage(`{"url":"t.png"}`)}); err != nil {
		t.Fatal(err)
	}
	p.until(t, regexp.MustCompile(`✓ thumb\s+succeeded`))
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, p.out.String(), p.stderr.String())
	}
	if !strings.Contains(p.out.String(), `output: {"url":"t.png"}`) {
		t.Fatalf("output:\n%s", p.out.String())
	}
}
