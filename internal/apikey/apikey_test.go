package apikey

import "testing"

func TestNewKeysAreWellFormedAndDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, h := New()
		if !WellFormed(k) {
			t.Fatalf("New() = %q: not well formed", k)
		}
		if h != Hash(k) || len(h) != 64 {
			t.Fatalf("hash %q of %q: want Hash(key), 64 hex digits", h, k)
		}
		if seen[k] {
			t.Fatalf("New() repeated %q", k)
		}
		seen[k] = true
	}
}

func TestWellFormedRefuses(t *testing.T) {
	k, _ := New()
	for _, s := range []string{"", "sf_", k[:len(k)-1], k + "A", "xx" + k[2:], k[:10] + "!" + k[11:], " " + k[1:]} {
		if WellFormed(s) {
			t.Errorf("WellFormed(%q) = true", s)
		}
	}
}
