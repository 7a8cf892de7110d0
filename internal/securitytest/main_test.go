package securitytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// binary is the starflow executable, built once by TestMain without -race.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		fmt.Fprintln(os.Stderr, "securitytest: cannot find the module root (go env GOMOD):", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "starflow-securitytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "starflow")
	build := exec.Command("go", "build", "-o", binary, "./cmd/starflow")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	build.Env = append(os.Environ(), "GOFLAGS="+withoutRace(os.Getenv("GOFLAGS")))
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "securitytest: building starflow:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

// Binary returns the path of the starflow executable built for this test
// binary.
func Binary(t *testing.T) string {
	t.Helper()
	if binary == "" {
		t.Fatal("securitytest: the starflow binary was not built")
	}
	return binary
}

// withoutRace drops -race from GOFLAGS: the binary is never race-built.
func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && !strings.HasPrefix(f, "-race=") && !strings.HasPrefix(f, "--race=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}
