package securitytest

// Issue 10 item 3: a step's output must not impersonate the engine's blob
// references. A checkpoint value stored in workflow_blobs is marked by a
// column of the checkpoint row, never by the value's shape, and a step
// whose output holds a __celestial key fails.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// kbVictim is a workflow whose step's output (a large service answer) is
// stored in workflow_blobs.
const kbVictim = `name: victim
steps:
  - id: big
    service_call: {method: GET, url: "%s"}
`

// kbBigService answers every request with a JSON body of about 300 KiB
// (over the 256 KiB blob threshold) that holds marker.
func kbBigService(t *testing.T, marker string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"secret_report": %q}`, marker+strings.Repeat("x", 300<<10))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// kbOneBlob returns the sha256 and size of the only workflow_blobs row.
func kbOneBlob(t *testing.T, path string) (sha string, size int) {
	t.Helper()
	queryRow(t, path, `SELECT sha256, size_bytes FROM workflow_blobs`, &sha, &size)
	return sha, size
}

// TestForgedBlobReferenceIsNeverDereferenced: run A stores a large output
// (a blob). Run B pauses after a step whose checkpointed output has the
// exact shape of a reference to A's blob — as a step could store before
// migration 00008, or any value shaped by an attacker who learned the
// blob's sha256. When B is woken and resumes, the checkpoint is restored
// as written: B's output is the forged reference itself, and nothing of
// A's data reaches B (its output, its detail, its checkpoints).
func TestForgedBlobReferenceIsNeverDereferenced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const marker = "VICTIM-DATA-7f3a"
	svc := kbBigService(t, marker)
	writeFile(t, dir, "victim.yaml", fmt.Sprintf(kbVictim, svc.URL))
	if r := runStarflow(t, dir, nil, "run", "victim.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("victim run: exit %d\n%s", r.code, r.stderr)
	}
	db := filepath.Join(dir, "w.db")
	sha, size := kbOneBlob(t, db)
	forged := fmt.Sprintf(`{"__celestialBlob":"%s","size_bytes":%d}`, sha, size)

	writeFile(t, dir, "forger.yaml", `name: forger
steps:
  - id: s1
    context_set: {x: 1}
  - id: w
    wait: {signal: go}
output: "${{ steps.s1.output }}"
`)
	d := startStarflow(t, dir, nil, "run", "forger.yaml", "--db", "w.db")
	d.waitFor(t, regexp.MustCompile(`waiting for`)) // the wait is registered: s1's checkpoint exists
	rw, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	var runID string
	if err := rw.QueryRow(`SELECT id FROM workflow_runs WHERE workflow_name = 'forger'`).Scan(&runID); err != nil {
		t.Fatal(err)
	}

	// The checkpoint of s1 now holds the forged reference as its output
	// (and context delta), with no blob mark.
	res, err := rw.Exec(`UPDATE workflow_run_checkpoints SET outputs_json = ?, context_json = ? WHERE run_id = ? AND step_id = 's1'`, forged, forged, runID)
	if err != nil {
		t.Fatalf("forging s1's checkpoint: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("forging s1's checkpoint: %d rows", n)
	}
	rw.Close()

	if r := runStarflow(t, dir, nil, "signal", runID, "go", "--db", "w.db"); r.code != 0 {
		t.Fatalf("signal: exit %d\n%s", r.code, r.stderr)
	}
	if code := d.wait(t); code != 0 {
		t.Fatalf("the resumed run: exit %d\n%s", code, d.stderr.String())
	}
	show := runStarflow(t, dir, nil, "runs", "show", runID, "--db", "w.db", "--json")
	var run struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &run); err != nil {
		t.Fatalf("runs show: %v\n%s", err, show.stdout)
	}
	if run.Status != "succeeded" || kbCompact(t, run.Output) != forged {
		t.Fatalf("run %s output %.200s; want the forged reference as written", run.Status, run.Output)
	}
	store, err := sqlitestore.Open(sqlitestore.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := store.ListCheckpoints(t.Context(), &state.ListCheckpointsParams{RunID: runID})
	store.Close()
	if err != nil || len(cps) < 2 {
		t.Fatalf("checkpoints of the forger: %d %v", len(cps), err)
	}
	for _, cp := range cps {
		if strings.Contains(string(cp.Output), marker) || strings.Contains(string(cp.Context), marker) {
			t.Fatalf("the forger's checkpoint of %s reads back the victim's data", cp.StepID)
		}
	}
	for _, args := range [][]string{
		{"runs", "show", runID, "--db", "w.db", "--json"},
		{"runs", "events", runID, "--db", "w.db"},
	} {
		r := runStarflow(t, dir, nil, args...)
		if r.code != 0 {
			t.Fatalf("starflow %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		if strings.Contains(r.stdout, marker) {
			t.Fatalf("starflow %s shows the victim run's data", strings.Join(args, " "))
		}
	}
}

// kbCompact is raw JSON without insignificant space.
func kbCompact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHostileServiceCannotPlantBlobReference: a service answering with a
// body shaped like a blob reference (to another run's blob) makes the step
// fail at once — not retried, nothing checkpointed — with an error naming
// the reserved key, when the step's output would hold it.
func TestHostileServiceCannotPlantBlobReference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var hits atomic.Int64
	forged := `{"__celestialBlob":"` + strings.Repeat("0f", 32) + `","size_bytes":300000}`
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, forged)
	}))
	t.Cleanup(svc.Close)
	writeFile(t, dir, "hostile.yaml", `name: hostile
steps:
  - id: fetch
    service_call: {method: GET, url: "`+svc.URL+`"}
    output: "${{ output.body }}"
    retry_policy: {max_attempts: 3, initial_interval: 10ms}
`)
	r := runStarflow(t, dir, nil, "run", "hostile.yaml", "--db", "w.db")
	if r.code != 1 || !strings.Contains(r.stderr, `output holds the reserved key "__celestialBlob" at the top level`) {
		t.Fatalf("exit %d, want 1 with the reserved key named:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the service was called %d times; a refused output is not retried", n)
	}
	cells := sqliteCells(t, filepath.Join(dir, "w.db"))
	for _, c := range cells {
		if strings.HasPrefix(c.where, "workflow_run_checkpoints.") {
			t.Fatalf("a checkpoint was written: %s = %.100s", c.where, c.value)
		}
	}
}
