package starflowtype

import (
	"errors"
	"strings"
	"testing"
)

func TestValidScopeName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"default", "prod", "team-a", "ws_2", "0", strings.Repeat("a", ScopeNameMax)} {
		if !ValidScopeName(ok) || CheckScopeName("workspace", ok) != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "../../x", "a/b", "Team", "a b", "-a", "_a", "a.b", "a\x1bb", "é", strings.Repeat("a", ScopeNameMax+1)} {
		if ValidScopeName(bad) {
			t.Errorf("%q accepted", bad)
		}
		err := CheckScopeName("env", bad)
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "env ") || strings.ContainsAny(err.Error(), "\x1b") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
