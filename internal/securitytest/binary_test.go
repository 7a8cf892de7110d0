package securitytest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryBuilt checks the suite's harness: the binary built by TestMain
// runs and prints its usage.
func TestBinaryBuilt(t *testing.T) {
	out, err := exec.Command(Binary(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("starflow --help: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "starflow") {
		t.Fatalf("starflow --help printed no usage:\n%s", out)
	}
}
