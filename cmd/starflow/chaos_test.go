package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChaosEnv: STARFLOW_FAULTS is honoured by a -tags chaos build
// (the injected failure, its stderr line, exit 2 for a bad rule, "chaos":
// true in version --json) and ignored by the normal build.
func TestChaosEnv(t *testing.T) {
	t.Parallel()
	chaosBin := filepath.Join(t.TempDir(), "starflow-chaos")
	build := exec.Command("go", "build", "-tags", "chaos", "-o", chaosBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags chaos: %v\n%s", err, out)
	}
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	env := []string{"STARFLOW_FAULTS=seed=3; op:EnqueueRun=fail"}
	runWith := func(bin string, env []string, args ...string) result {
		t.Helper()
		return binaryCmd(t, bin, dir, env, args...)
	}

	normal := starflowCmd(t, dir, env, "run", "three.yaml", "--input", `{"n": 21}`, "--db", "normal.db")
	if normal.code != 0 || strings.Contains(normal.stderr, "faultpoint injected") {
		t.Fatalf("normal build under STARFLOW_FAULTS: exit %d\n%s", normal.code, normal.stderr)
	}
	if v := starflowCmd(t, dir, nil, "version", "--json"); strings.Contains(v.stdout, `"chaos"`) {
		t.Errorf("normal build's version --json says chaos:\n%s", v.stdout)
	}

	chaos := runWith(chaosBin, env, "run", "three.yaml", "--input", `{"n": 21}`, "--db", "chaos.db")
	if chaos.code == 0 {
		t.Fatalf("chaos build ran despite op:EnqueueRun=fail:\n%s", chaos.stdout)
	}
	if n := strings.Count(chaos.stderr, "faultpoint injected point=op:EnqueueRun action=fail\n"); n != 1 {
		t.Errorf("chaos build printed the injection line %d times, want 1:\n%s", n, chaos.stderr)
	}
	if !strings.Contains(chaos.stderr, "faultpoint: injected failure at op:EnqueueRun") {
		t.Errorf("chaos build's error does not name the injection:\n%s", chaos.stderr)
	}
	if v := runWith(chaosBin, nil, "version", "--json"); !strings.Contains(v.stdout, `"chaos": true`) {
		t.Errorf("chaos build's version --json lacks \"chaos\": true:\n%s", v.stdout)
	}
	killed := runWith(chaosBin, []string{"STARFLOW_FAULTS=op:EnqueueRun=exit"}, "run", "three.yaml", "--db", "killed.db")
	if killed.code != -1 || !strings.HasSuffix(killed.stderr, "faultpoint injected point=op:EnqueueRun action=exit\n") {
		t.Errorf("exit rule: exit code %d (want -1: killed by a signal), stderr %q", killed.code, killed.stderr)
	}
	bad := runWith(chaosBin, []string{"STARFLOW_FAULTS=query:x=explode"}, "version")
	if bad.code != 2 || !strings.Contains(bad.stderr, `rule "query:x=explode"`) {
		t.Errorf("bad spec: exit %d, stderr %q; want exit 2 naming the rule", bad.code, bad.stderr)
	}
	skew := runWith(chaosBin, []string{"STARFLOW_CHAOS_CLOCK_SKEW=soon"}, "version")
	if skew.code != 2 || !strings.Contains(skew.stderr, "STARFLOW_CHAOS_CLOCK_SKEW") {
		t.Errorf("bad skew: exit %d, stderr %q; want exit 2", skew.code, skew.stderr)
	}
}
