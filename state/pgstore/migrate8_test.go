package pgstore_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMigration8RemovesWakeKeySecrets: a schema older than migration
// 00008 keeps the generated wake-key secret in wake_keys. Migrating warns
// naming the key id (the secret is dropped: tokens it signed verify only
// if STARFLOW_WAKE_KEYS holds it), and afterwards no column of wake_keys
// holds the secret in any form; the key keeps its id with an empty
// fingerprint, which the next registration fills. Old checkpoints that are
// exactly a reference to an existing blob are marked as such; a forged
// shape is not.
func TestMigration8RemovesWakeKeySecrets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	var logs syncBuffer
	s, err := pgstore.Open(ctx, pgstore.Config{URL: testURL(), Schema: schema, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := pgstore.MigrateUpTo(ctx, s, 7); err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte("S3cr3t!"), 5)[:32]
	data := []byte(`{"big":"` + strings.Repeat("y", 300<<10) + `"}`)
	ref, sha := state.BlobRef(data)
	forged := fmt.Sprintf(`{"__celestialBlob":"%s","size_bytes":7}`, sha)
	const run = "00000000-0000-0000-0000-000000000001"
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO wake_keys (id, secret) VALUES ('generated-1', $1)`, []any{secret}},
		{`INSERT INTO workflow_runs (id, workflow_name) VALUES ($1, 'wf')`, []any{run}},
		{`INSERT INTO workflow_blobs (sha256, size_bytes, data) VALUES ($1, $2, $3)`, []any{sha, len(data), data}},
		{`INSERT INTO workflow_run_checkpoints (run_id, step_id, context_json, outputs_json) VALUES ($1, 'real', $2, $2)`, []any{run, string(ref)}},
		{`INSERT INTO workflow_run_checkpoints (run_id, step_id, context_json, outputs_json) VALUES ($1, 'forged', '{}', $2)`, []any{run, forged}},
	} {
		if _, err := s.Pool().Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "generated-1") || !strings.Contains(logs.String(), "STARFLOW_WAKE_KEYS") {
		t.Errorf("no warning naming the removed key:\n%s", logs.String())
	}
	rows, err := s.Pool().Query(ctx, `SELECT id, fingerprint, created_at::text, seq::text FROM wake_keys`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
		var id, fp, created, seq string
		if err := rows.Scan(&id, &fp, &created, &seq); err != nil {
			t.Fatal(err)
		}
		if id != "generated-1" || fp != "" {
			t.Errorf("wake_keys row %q %q, want generated-1 without a fingerprint", id, fp)
		}
		for _, v := range []string{id, fp, created, seq} {
			if strings.Contains(v, string(secret)) || strings.Contains(v, fmt.Sprintf("%x", secret)) {
				t.Errorf("a wake_keys value holds the secret: %q", v)
			}
		}
	}
	rows.Close()
	if n != 1 {
		t.Fatalf("%d wake_keys rows, want 1", n)
	}
	fp := strings.Repeat("ab", 32)
	if got, err := s.AddWakeKey(ctx, state.WakeKey{ID: "generated-1", Fingerprint: fp}); err != nil || got.Fingerprint != fp {
		t.Fatalf("registering the migrated key = %+v, %v; want its fingerprint adopted", got, err)
	}
	cps, err := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: run})
	if err != nil || len(cps) != 2 {
		t.Fatalf("ListCheckpoints: %d %v", len(cps), err)
	}
	for _, cp := range cps {
		switch cp.StepID {
		case "real":
			if string(cp.Output) != string(data) || string(cp.Context) != string(data) {
				t.Errorf("an old real reference no longer reads back its blob (%d/%d bytes)", len(cp.Output), len(cp.Context))
			}
		case "forged":
			if string(cp.Output) != forged {
				t.Errorf("a forged old reference was dereferenced: %d bytes", len(cp.Output))
			}
		}
	}
}
