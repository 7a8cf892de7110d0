package warmopen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
	"github.com/starflow/starflow/warm/natskv"
	"github.com/starflow/starflow/warm/warmopen"
)

func TestOpenMemory(t *testing.T) {
	s, err := warmopen.Open(context.Background(), " memory ", warmopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*memory.Store); !ok {
		t.Fatalf("Open(memory) = %T", s)
	}
}

func TestOpenEmbedded(t *testing.T) {
	dir := warmopen.EmbeddedDir(filepath.Join(t.TempDir(), "starflow.db"))
	if !strings.HasSuffix(dir, "starflow.db.warm") {
		t.Fatalf("EmbeddedDir = %s", dir)
	}
	ctx := context.Background()
	s, err := warmopen.Open(ctx, "embedded", warmopen.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*natskv.Store); !ok {
		t.Fatalf("Open(embedded) = %T", s)
	}
	if _, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r", Version: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("embedded data directory %s: %v", dir, err)
	}
}

func TestOpenNATS(t *testing.T) {
	srv, err := natskv.StartServer(natskv.EmbeddedOptions{Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	s, err := warmopen.Open(context.Background(), srv.ClientURL(), warmopen.Options{NATS: natskv.Options{Prefix: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for spec, want := range map[string]string{
		"":                "unknown",
		"redis://x:1":     "unknown",
		"memroy":          `"memroy"`,
		"embedded":        "DataDir",
		"nats://":         "no host",
		"nats://h:1,\x00": "nats://",
	} {
		s, err := warmopen.Open(ctx, spec, warmopen.Options{})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", spec)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want it to mention %s", spec, err, want)
		}
		if errors.Is(err, warm.ErrUnavailable) {
			t.Errorf("Open(%q): a bad spec is not ErrUnavailable", spec)
		}
	}
}
