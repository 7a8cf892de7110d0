package sqlitestore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestMigration8MovesWakeKeySecretsOut: a database older than migration
// 00008 keeps the generated wake-key secret in wake_keys. Migrate moves it
// to the key file beside the database (mode 0600, so tokens it signed keep
// verifying), the table keeps only the id (its fingerprint is adopted at
// the next registration), and the secret's bytes are gone from the
// database files, not only from the table.
func TestMigration8MovesWakeKeySecretsOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "starflow.db")
	old, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.MigrateUpTo(ctx, old, 7); err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte("S3cr3t!"), 5)[:32]
	if _, err := sqlitestore.WriteDB(old).ExecContext(ctx, `INSERT INTO wake_keys (id, secret) VALUES ('generated-1', ?)`, secret); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Contains(b, secret) {
		t.Fatal("test setup: the old database file does not hold the secret")
	}

	var logs syncBuffer
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keyFile := s.Capabilities().WakeKeyFile
	if keyFile != path+".wakekeys" {
		t.Fatalf("Capabilities().WakeKeyFile = %q, want %q", keyFile, path+".wakekeys")
	}
	if m := modeOf(t, keyFile); m != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", m)
	}
	keys, err := waketoken.ReadKeyFile(keyFile, nil)
	if err != nil || len(keys) != 1 || keys[0].ID != "generated-1" || !bytes.Equal(keys[0].Secret, secret) {
		t.Fatalf("key file holds %v, %v; want the stored key generated-1", keys, err)
	}
	if !strings.Contains(logs.String(), "moved the wake-token signing secrets") || !strings.Contains(logs.String(), keyFile) {
		t.Errorf("no warning naming the key file:\n%s", logs.String())
	}
	var cols []string
	rows, err := sqlitestore.WriteDB(s).QueryContext(ctx, `SELECT name FROM pragma_table_info('wake_keys')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	rows.Close()
	if strings.Join(cols, ",") != "id,fingerprint,created_at" {
		t.Fatalf("wake_keys columns after 00008: %v", cols)
	}
	stored, err := s.WakeKeys(ctx)
	if err != nil || len(stored) != 1 || stored[0].ID != "generated-1" || stored[0].Fingerprint != "" {
		t.Fatalf("WakeKeys after 00008 = %+v, %v; want generated-1 without a fingerprint", stored, err)
	}
	fp := waketoken.Fingerprint(keys[0])
	if got, err := s.AddWakeKey(ctx, state.WakeKey{ID: "generated-1", Fingerprint: fp}); err != nil || got.Fingerprint != fp {
		t.Fatalf("registering the migrated key = %+v, %v; want its fingerprint adopted", got, err)
	}
	if got, _ := s.AddWakeKey(ctx, state.WakeKey{ID: "generated-1", Fingerprint: strings.Repeat("0", 64)}); got.Fingerprint != fp {
		t.Fatalf("a second fingerprint replaced the adopted one: %+v", got)
	}
	for _, name := range []string{path, path + "-wal"} {
		if b, err := os.ReadFile(name); err == nil && bytes.Contains(b, secret) {
			t.Errorf("%s still holds the secret's bytes after the migration", filepath.Base(name))
		}
	}

	// Opening again migrates nothing and moves nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs = syncBuffer{}
	again, err := sqlitestore.Open(sqlitestore.Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if err := again.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "" {
		t.Errorf("a second open logged:\n%s", logs.String())
	}
}

// TestMigration8MarksOldBlobReferences: checkpoints written before
// migration 00008 hold blob references by shape only. The migration marks
// those that are exactly the reference Starflow wrote to an existing blob
// of that size, so they still read back whole; anything else shaped like
// a reference (another size, a missing blob, extra keys) is data and reads
// back as written.
func TestMigration8MarksOldBlobReferences(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "starflow.db")
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := sqlitestore.MigrateUpTo(ctx, s, 7); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"big":"` + strings.Repeat("y", 300<<10) + `"}`)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	ref, _ := state.BlobRef(data)
	db := sqlitestore.WriteDB(s)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO workflow_runs (id, workflow_name) VALUES ('00000000-0000-0000-0000-000000000001', 'wf')`)
	exec(`INSERT INTO workflow_blobs (sha256, size_bytes, data) VALUES (?, ?, ?)`, sha, len(data), data)
	cases := map[string]struct{ output, context, wantOutput, wantContext string }{
		"real":        {string(ref), string(ref), string(data), string(data)},
		"output only": {string(ref), `{}`, string(data), `{}`},
		"wrong size":  {fmt.Sprintf(`{"__celestialBlob":"%s","size_bytes":7}`, sha), `{}`, "", ""},
		"no blob":     {`{"__celestialBlob":"` + strings.Repeat("0", 64) + fmt.Sprintf(`","size_bytes":%d}`, len(data)), `{}`, "", ""},
		"extra key":   {strings.TrimSuffix(string(ref), "}") + `,"x":1}`, `{}`, "", ""},
	}
	for id, c := range cases {
		exec(`INSERT INTO workflow_run_checkpoints (run_id, step_id, context_json, outputs_json) VALUES ('00000000-0000-0000-0000-000000000001', ?, ?, ?)`,
			id, c.context, c.output)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cps, err := s.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: "00000000-0000-0000-0000-000000000001"})
	if err != nil || len(cps) != len(cases) {
		t.Fatalf("ListCheckpoints: %d, %v", len(cps), err)
	}
	for _, cp := range cps {
		c := cases[cp.StepID]
		wantOut, wantCtx := c.wantOutput, c.wantContext
		if wantOut == "" {
			wantOut, wantCtx = c.output, c.context
		}
		if string(cp.Output) != wantOut || string(cp.Context) != wantCtx {
			t.Errorf("%s: read back output %.60s… (%d bytes), context %.60s… (%d bytes); want %d and %d bytes",
				cp.StepID, cp.Output, len(cp.Output), cp.Context, len(cp.Context), len(wantOut), len(wantCtx))
		}
	}
}
