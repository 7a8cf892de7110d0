package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/stucktest"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestStuckReasonsCLI (issue 13): `runs show` prints the why-stuck reason
// and its sentence of a run in each of the ten states (internal/stucktest),
// `runs list` has a STUCK column, both with --json too, and the store and
// a server answer exactly the same. The engine and HTTP API halves are
// the root package's TestStuckReasons.
func TestStuckReasonsCLI(t *testing.T) {
	t.Parallel()
	f := &remoteFixture{dir: t.TempDir()}
	f.admin = f.createKey(t, "ops", "admin", "default")
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(f.dir, "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// The fixture's engine leads maintenance (it must: the server's sweep
	// would interrupt the run whose runner died), so the server starts
	// after it.
	fx := stucktest.New(t, store, stucktest.Options{})
	srv := startDaemon(t, f.dir, nil, "server", "--db", "t.db", "--addr", "127.0.0.1:0")
	if f.url = srv.waitStarted(t); f.url == "" {
		t.Fatal("the server printed no listening address")
	}

	for _, c := range fx.Cases {
		out := f.same(t, true, "runs", "show", c.RunID).stdout
		if !strings.Contains(out, "stuck:") || !strings.Contains(out, string(c.Reason)+" since ") || !strings.Contains(out, "why:") {
			t.Errorf("runs show %s (%s): no stuck and why rows naming %s:\n%s", c.RunID, c.Name, c.Reason, out)
		}
		js := f.same(t, true, "runs", "show", c.RunID, "--json").stdout
		var v api.RunView
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("runs show --json: %v\n%s", err, js)
		}
		if err := c.Verify(v.Stuck); err != nil {
			t.Errorf("runs show --json: %v", err)
		}
	}

	table := f.same(t, true, "runs", "list", "--limit", "100").stdout
	lines := strings.Split(table, "\n")
	if !strings.Contains(lines[0], " STUCK ") {
		t.Errorf("runs list: no STUCK column in %q", lines[0])
	}
	col := strings.Index(lines[0], "STUCK")
	for _, c := range fx.Cases {
		found := false
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, c.RunID) {
				found = true
				if len(l) < col || !strings.HasPrefix(l[col:], string(c.Reason)+" ") {
					t.Errorf("runs list: the row of %s (%s) has no %s under STUCK: %q", c.RunID, c.Name, c.Reason, l)
				}
			}
		}
		if !found {
			t.Errorf("runs list: %s (%s) not listed", c.RunID, c.Name)
		}
	}
	js := f.same(t, true, "runs", "list", "--limit", "100", "--json").stdout
	var runs []*api.RunView
	if err := json.Unmarshal([]byte(js), &runs); err != nil {
		t.Fatalf("runs list --json: %v\n%s", err, js)
	}
	byID := map[string]*api.RunView{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	for _, c := range fx.Cases {
		if r := byID[c.RunID]; r == nil {
			t.Errorf("runs list --json: %s not listed", c.RunID)
		} else if err := c.Verify(r.Stuck); err != nil {
			t.Errorf("runs list --json: %v", err)
		}
	}
}
