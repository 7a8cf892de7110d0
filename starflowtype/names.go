package starflowtype

import "fmt"

// ScopeNameMax is the longest workspace or env name, in characters.
const ScopeNameMax = 100

// ValidScopeName reports whether s may name a workspace or an env: the
// spec's name rule for workflows, steps and lanes, [a-z0-9][a-z0-9_-]*,
// at most ScopeNameMax characters. Names reach URLs (a webhook's
// ?workspace=), file-like listings and logs; the rule keeps out path
// separators, dots, spaces and control characters.
func ValidScopeName(s string) bool {
	if s == "" || len(s) > ScopeNameMax {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckScopeName refuses (ErrInvalid) a workspace or env name — what says
// which — that ValidScopeName does not accept, naming the rule.
func CheckScopeName(what, s string) error {
	if ValidScopeName(s) {
		return nil
	}
	return Invalid(fmt.Errorf("%s %q is not a valid name: use lower-case letters, digits, '-' and '_', starting with a letter or digit ([a-z0-9][a-z0-9_-]*, at most %d characters)", what, s, ScopeNameMax))
}
