package examples_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestAPICurlScript runs examples/api-curl.sh (sh, curl, jq: a client
// that is not Go) against a real `starflow dev` process whose API needs
// a key: it applies the quickstart, enqueues twice with one
// idempotency key, follows the SSE stream to the end and reads the
// ledger.
func TestAPICurlScript(t *testing.T) {
	for _, tool := range []string{"sh", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed by examples/api-curl.sh: %v", tool, err)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "starflow")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/starflow").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "sf.db")
	key := adminKey(t, db)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := exec.CommandContext(ctx, bin, "dev", "--db", db, "--addr", "127.0.0.1:0")
	dev.Cancel = func() error { return dev.Process.Signal(os.Interrupt) }
	stderr, err := dev.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = dev.Wait() }()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				url <- u
			}
		}
	}()
	var base string
	select {
	case base = <-url:
	case <-time.After(30 * time.Second):
		t.Fatal("starflow dev did not say where it listens")
	}
	script := exec.Command("sh", "api-curl.sh", "quickstart.yaml")
	script.Env = append(os.Environ(), "STARFLOW_SERVER="+base, "STARFLOW_API_KEY="+key)
	out, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("api-curl.sh: %v\n%s", err, out)
	}
	t.Logf("api-curl.sh:\n%s", out)
	for _, want := range []string{"== apply", "run_queued", "run_succeeded", "run succeeded", "status succeeded", "total\tsucceeded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the script's output has no %q:\n%s", want, out)
		}
	}
	// Without the key the same script is refused, and says so.
	script = exec.Command("sh", "api-curl.sh", "quickstart.yaml")
	script.Env = append(os.Environ(), "STARFLOW_SERVER="+base, "STARFLOW_API_KEY=")
	out, err = script.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "HTTP 401") {
		t.Errorf("without a key: %v\n%s; want a failure with HTTP 401", err, out)
	}
}

// adminKey creates the store at db with an admin key of the default
// workspace and returns the key.
func adminKey(t *testing.T, db string) string {
	t.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	secret, hash := apikey.New()
	if _, err := s.CreateAPIKey(ctx, &state.CreateAPIKeyParams{WorkspaceID: state.DefaultWorkspace, Role: starflowtype.RoleAdmin, Name: "curl", KeyHash: hash}); err != nil {
		t.Fatal(err)
	}
	return secret
}
