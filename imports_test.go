package starflow_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules keeps the arrows pointing down (docs/architecture.md,
// "Packages and the direction of dependencies"): the types import only the
// standard library, the store core and the mirror no SQL driver, the
// stores neither the engine nor the warm tier. It reads `go list`.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/starflow/starflow"
	drivers := []string{"database/sql", "github.com/jackc/", "modernc.org/sqlite"}
	rules := map[string]func(imp string) bool{ // package → import allowed?
		mod + "/starflowtype": func(imp string) bool { return !strings.Contains(imp, ".") },
		mod + "/state": func(imp string) bool {
			return !strings.Contains(imp, ".") || imp == mod+"/starflowtype"
		},
		mod + "/internal/storecore": func(imp string) bool {
			return !hasPrefix(imp, drivers...) && !hasPrefix(imp, mod+"/state/", mod+"/internal/engine", mod+"/internal/runner", mod+"/mirror", mod+"/warm")
		},
		mod + "/mirror": func(imp string) bool {
			return !hasPrefix(imp, drivers...) && !hasPrefix(imp, mod+"/state/", mod+"/internal/storecore", mod+"/warm/")
		},
	}
	for _, store := range []string{"/state/pgstore", "/state/sqlitestore", "/state/nullstore"} {
		rules[mod+store] = func(imp string) bool {
			return imp != mod && !hasPrefix(imp, mod+"/internal/engine", mod+"/internal/runner", mod+"/mirror", mod+"/warm")
		}
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		allowed, ok := rules[fields[0]]
		if !ok {
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if !allowed(imp) {
				t.Errorf("%s imports %s, which its import rule forbids", fields[0], imp)
			}
		}
	}
	if seen != len(rules) {
		t.Fatalf("checked %d of the %d packages with rules; go list output changed?", seen, len(rules))
	}
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
