package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand: `starflow version` names the module, the Go
// toolchain and platform it was built with, as text and as JSON.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := starflowCmd(t, dir, nil, "version")
	if r.code != 0 {
		t.Fatalf("version: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"starflow ", "module   github.com/starflow/starflow", "commit   ", "go       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%q not in:\n%s", want, r.stdout)
		}
	}
	r = starflowCmd(t, dir, nil, "version", "--json")
	var b buildInfo
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil || r.code != 0 {
		t.Fatalf("version --json: exit %d, %v: %s", r.code, err, r.stdout)
	}
	if b.Module != "github.com/starflow/starflow" || b.Go != runtime.Version() || b.Version == "" {
		t.Errorf("version --json: %+v", b)
	}
}

// TestVersionFromLinker: a version set at link time (-X main.version)
// wins over the module's.
func TestVersionFromLinker(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.9.9"
	if b := readBuildInfo(); b.Version != "v9.9.9" {
		t.Fatalf("version %q, want v9.9.9", b.Version)
	}
}
