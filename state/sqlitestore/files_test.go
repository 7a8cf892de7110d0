package sqlitestore_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
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

// modeOf is the permission bits of file name.
func modeOf(t *testing.T, name string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestNewDatabaseFilesAreOwnerOnly: a database created by Open, and the
// -wal and -shm files SQLite creates beside it while writing, are 0600
// whatever the process umask lets through (issue 10 item 1: a 0644 file
// let any local user read the database).
func TestNewDatabaseFilesAreOwnerOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "starflow.db")
	s := open(t, path, nil)
	// A write, so that the WAL and the shared-memory index exist.
	if _, err := s.EnqueueRun(t.Context(), &state.EnqueueRunParams{WorkflowName: "wf", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		if m := modeOf(t, name); m != sqlitestore.FileMode {
			t.Errorf("%s has mode %04o, want %04o", filepath.Base(name), m, sqlitestore.FileMode)
		}
	}
}

// TestOpenTightensReadableFiles: existing files of a database that other
// users can read (made by an older version, or by hand) are made
// owner-only at Open, with a warning naming each file, and the database
// still opens and works.
func TestOpenTightensReadableFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "starflow.db")
	first := open(t, path, nil)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// An empty WAL and shared-memory file are what a crashed process may
	// leave; SQLite treats both as empty.
	for _, name := range []string{path + "-wal", path + "-shm"} {
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(name, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		if m := modeOf(t, name); m != 0o600 {
			t.Errorf("%s has mode %04o after Open, want 0600", filepath.Base(name), m)
		}
		if !strings.Contains(logs.String(), "file="+name+" ") {
			t.Errorf("no warning names %s; logs:\n%s", name, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "from=0644 to=0600") {
		t.Errorf("want a warning saying 0644 became 0600; logs:\n%s", logs.String())
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueRun(t.Context(), &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
		t.Fatalf("the tightened database does not work: %v", err)
	}
}

// TestOpenLeavesOwnerOnlyFilesQuiet: opening a database whose files are
// already owner-only logs nothing.
func TestOpenLeavesOwnerOnlyFilesQuiet(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "starflow.db")
	var logs syncBuffer
	for range 2 {
		s, err := sqlitestore.Open(sqlitestore.Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if strings.Contains(logs.String(), "database file") {
		t.Errorf("warnings for owner-only files:\n%s", logs.String())
	}
}

// TestOpenMissingFolder: a database in a folder that does not exist is a
// clear error naming the path.
func TestOpenMissingFolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope", "starflow.db")
	_, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open in a missing folder: %v, want an error naming %s", err, path)
	}
}
