package main

import (
	"strings"
	"testing"

	"github.com/starflow/starflow/internal/apikey"
)

// TestKeysCreateWorkerRole: `keys create --role worker` makes a key for a
// remote worker (docs/operations.md, "Remote workers: job steps"), and the
// refusal of an unknown role lists worker among the roles.
func TestKeysCreateWorkerRole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := starflowCmd(t, dir, nil, "keys", "create", "--name", "pool-a", "--role", "worker", "--workspace", "default", "--db", "k.db")
	if key := strings.TrimSuffix(r.stdout, "\n"); r.code != 0 || !apikey.WellFormed(key) {
		t.Fatalf("keys create --role worker: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	bad := starflowCmd(t, dir, nil, "keys", "create", "--name", "z", "--role", "root", "--workspace", "default", "--db", "k.db")
	if bad.code != exitUsage || !strings.Contains(bad.stderr, "use one of viewer, operator, admin, worker") {
		t.Fatalf("keys create --role root: exit %d, stderr %q", bad.code, bad.stderr)
	}
}
